// The console's shell: signing in and out, the test-mode banner, and which view the address
// (`#/view/...`) shows. Every view is built by messages.js or workspace.js into <main>; leaving a
// view aborts its signal, which ends its requests' polling.

import { api, session, whenUnauthorized } from "./api.js";
import { errorBox, field, h, replace } from "./dom.js";
import { messageList, promise, timeline } from "./messages.js";
import { campaigns, suppressions, templates, usage, webhooks } from "./workspace.js";

// Each view by the first part of its address; `#/messages/<id>` is one message's timeline.
const VIEWS = { messages: messageList, promise, webhooks, suppressions, templates, campaigns, usage };

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const banner = document.getElementById("test-mode");
const signOutButton = document.getElementById("sign-out");
let current = null; // the shown view's AbortController
let refusal = null; // why the last key was signed out

// `#/messages/msg_…?status=sent`: the view's name, its further parts, and its query.
function parse(hash) {
  const [path, search = ""] = hash.replace(/^#\/?/, "").split("?");
  const parts = path
    .split("/")
    .filter(Boolean)
    .map((p) => decodeURIComponent(p));
  return { name: parts[0] || "messages", parts: parts.slice(1), query: new URLSearchParams(search) };
}

function show(focus) {
  current?.abort();
  current = new AbortController();
  const signedIn = Boolean(session.key());
  banner.hidden = !(signedIn && session.testMode());
  nav.hidden = !signedIn;
  signOutButton.hidden = !signedIn;
  if (!signedIn) {
    signIn();
    return;
  }
  const { name, parts, query } = parse(location.hash);
  const render = name === "messages" && parts.length ? timeline : VIEWS[name];
  for (const a of nav.querySelectorAll("a")) {
    if (a.getAttribute("href") === `#/${name}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const section = h("div", { class: "view" });
  replace(main, section);
  const context = {
    section,
    parts,
    query,
    signal: current.signal,
    heading(text) {
      document.title = `${text} · sendonce console${session.testMode() ? " (test mode)" : ""}`;
      const heading = h("h1", { tabindex: "-1" }, text);
      section.append(heading);
      return heading;
    },
  };
  if (render && Object.hasOwn(VIEWS, name)) {
    render(context);
  } else {
    context.heading("Not found");
    section.append(h("p", {}, "No such view. ", h("a", { href: "#/messages" }, "Go to the messages.")));
  }
  // After a change of view (not the first load), the new view's heading takes the focus, so a
  // keyboard or screen reader user starts there.
  if (focus) section.querySelector("h1")?.focus();
}

function signIn() {
  document.title = "Sign in · sendonce console";
  const input = h("input", {
    type: "password",
    name: "key",
    required: true,
    autocomplete: "off",
    spellcheck: "false",
  });
  const problem = h("div", { class: "problem" }, refusal ? errorBox(refusal) : null);
  const button = h("button", { type: "submit", class: "primary" }, "Sign in");
  const form = h(
    "form",
    {
      class: "sign-in",
      on: {
        submit: async (event) => {
          event.preventDefault();
          const key = input.value.trim();
          if (!key) return;
          button.disabled = true;
          try {
            await api("GET", "/v1/usage", { key }); // the key is checked before it is kept
            refusal = null;
            session.signIn(key);
            // A new address shows its view (hashchange); the same one is shown again here.
            if (!location.hash.startsWith("#/")) location.hash = "#/messages";
            else show(true);
          } catch (error) {
            replace(problem, errorBox(error));
            input.focus();
          } finally {
            button.disabled = false;
          }
        },
      },
    },
    field(
      "API key",
      input,
      "Kept in this browser tab only (sessionStorage): closing the tab forgets it. " +
        "A test key (sk_test_…) shows the test twin.",
    ),
    button,
  );
  replace(
    main,
    h(
      "div",
      { class: "view narrow" },
      h("h1", { tabindex: "-1" }, "Sign in"),
      h("p", {}, "The console shows one workspace: the one its API key belongs to."),
      problem,
      form,
    ),
  );
  input.focus();
}

whenUnauthorized((error) => {
  refusal = error;
  session.signOut();
  show(false);
});

signOutButton.addEventListener("click", () => {
  refusal = null;
  session.signOut();
  show(false);
});

// The skip link moves the focus without touching the address, which names the view.
document.getElementById("skip").addEventListener("click", (event) => {
  event.preventDefault();
  main.focus();
});

window.addEventListener("hashchange", () => {
  if (location.hash.startsWith("#/") || location.hash === "") show(true);
});

show(false);

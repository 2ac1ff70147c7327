// The console's one way to the API: same origin, JSON, the key from this tab's sessionStorage and
// nowhere else (no cookie, no localStorage), sent only in the Authorization header.

const KEY = "sendonce.console.apiKey";
// The API's root: this file is served at <root>/console/api.js, whatever stage prefix <root> has.
const ROOT = new URL("../", import.meta.url);

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export const session = {
  key() {
    return sessionStorage.getItem(KEY);
  },
  signIn(key) {
    sessionStorage.setItem(KEY, key);
  },
  signOut() {
    sessionStorage.removeItem(KEY);
  },
  // A test key's console sees only the workspace's test twin.
  testMode() {
    return (this.key() ?? "").startsWith("sk_test_");
  },
};

let unauthorized = () => {};
let waiting = 0;

// <main> is aria-busy while the console waits for the API: what it shows is about to change.
function busy(change) {
  waiting += change;
  const main = document.getElementById("main");
  if (waiting > 0) main?.setAttribute("aria-busy", "true");
  else main?.removeAttribute("aria-busy");
}

// What to do when the API refuses the tab's key (401): sign out, and say why.
export function whenUnauthorized(handler) {
  unauthorized = handler;
}

// `path` is the API's, each dynamic part already encoded (`part`). Resolves to {status, data,
// headers} for a success; rejects with an ApiError carrying the API's code and message.
export async function api(method, path, { query, body, key } = {}) {
  const url = new URL(path.replace(/^\//, ""), ROOT);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, String(value));
  }
  const headers = { Accept: "application/json", Authorization: `Bearer ${key ?? session.key() ?? ""}` };
  const init = { method, headers, credentials: "omit", cache: "no-store", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  let data = null;
  busy(1);
  try {
    response = await fetch(url, init);
    data = await response.json().catch(() => null);
  } catch {
    throw new ApiError(0, "network_error", "The API could not be reached.");
  } finally {
    busy(-1);
  }
  if (!response.ok || data === null || data.success === false) {
    const error = data?.error ?? {
      code: `http_${response.status}`,
      message: "The API answered without its JSON body.",
    };
    if (response.status === 401 && key === undefined) unauthorized(error);
    throw new ApiError(response.status, error.code, error.message, error.details);
  }
  return { status: response.status, data, headers: response.headers };
}

export function part(value) {
  return encodeURIComponent(String(value));
}

// The fields of a structured header such as `"workspace";r=17;t=1`, as numbers by name.
export function rateFields(header) {
  const fields = {};
  for (const item of (header ?? "").split(";").slice(1)) {
    const [name, value] = item.split("=");
    if (name && value !== undefined && /^\d+$/.test(value.trim())) fields[name.trim()] = Number(value);
  }
  return fields;
}

// `task` again every `ms` while the view is shown and the tab visible; it stops when the view's
// signal aborts, or when `task` answers false (nothing left to watch).
export function every(signal, ms, task) {
  let timer = null;
  const tick = async () => {
    if (signal.aborted) return;
    if (document.visibilityState === "visible" && (await task()) === false) return;
    if (!signal.aborted) timer = setTimeout(tick, ms);
  };
  timer = setTimeout(tick, ms);
  signal.addEventListener("abort", () => clearTimeout(timer));
}

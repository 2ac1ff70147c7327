// The console's one way to put anything on the page: elements made with createElement, and text
// set as text. Data is never parsed as markup (no innerHTML), no element gets an inline handler or
// style, and a link goes only to one of the console's own views (`#/...`): a value from the API,
// whatever it holds, shows as the characters it is.

const FORBIDDEN = /^(on|style$|innerhtml$|outerhtml$|srcdoc$)/i;

// An element: `props` are attributes (true: present, false/null/undefined: absent), but for
// `class`, `text` (its text), and `on` (event listeners); `children` are nodes or text.
export function h(tag, props = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "on") {
      for (const [type, listener] of Object.entries(value)) element.addEventListener(type, listener);
    } else if (FORBIDDEN.test(name)) {
      throw new Error(`the console never sets ${name}`);
    } else if (name === "class") {
      element.className = value;
    } else if (name === "text") {
      element.textContent = String(value);
    } else {
      if (name === "href" && !String(value).startsWith("#")) throw new Error("a link stays in the console");
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(element, children);
  return element;
}

export function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

export function clear(element) {
  element.replaceChildren();
  return element;
}

export function replace(element, ...children) {
  clear(element);
  return append(element, children);
}

// A view's address: `#/messages/msg_…`, each part encoded, so an id makes only a console link.
export function route(...parts) {
  return "#/" + parts.map((part) => encodeURIComponent(String(part))).join("/");
}

export function link(parts, ...children) {
  return h("a", { href: route(...parts) }, ...children);
}

// RFC 3339 as shown everywhere in the console: UTC, to the second, the instant in `datetime`.
export function time(value) {
  if (!value) return h("span", { class: "muted" }, "—");
  const moment = new Date(value);
  if (Number.isNaN(moment.getTime())) return h("span", {}, String(value));
  const shown = moment
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, " UTC");
  return h("time", { datetime: moment.toISOString() }, shown);
}

export function number(value) {
  return typeof value === "number" ? value.toLocaleString("en-US") : "—";
}

// `3 messages`, `1 message`.
export function count(value, word, plural = `${word}s`) {
  return `${number(value)} ${value === 1 ? word : plural}`;
}

// A value from a fixed set (a status, an outcome), as a badge whose class says which: only letters
// and underscores reach the class name.
export function badge(value) {
  const text = String(value ?? "—");
  return h("span", { class: `badge badge-${text.toLowerCase().replace(/[^a-z_]/g, "")}` }, text);
}

export function code(value) {
  return h("code", {}, String(value ?? "—"));
}

export function excerpt(value, length = 100) {
  const text = String(value ?? "");
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}

// The API's error, as its code and message; a validation error's fields too.
export function errorBox(error) {
  const details = Array.isArray(error?.details)
    ? h(
        "ul",
        {},
        error.details.map((d) => h("li", {}, `${d.field ?? ""}: ${d.message ?? ""}`)),
      )
    : null;
  return h(
    "div",
    { class: "error", role: "alert" },
    h("p", {}, h("strong", {}, error?.code ?? "error"), " ", error?.message ?? String(error)),
    details,
  );
}

// A polite status line for what a view is doing (loading, saved, removed).
export function statusLine(text = "") {
  return h("p", { class: "status-line", role: "status" }, text);
}

// A table that reads as a list of labelled cards on a narrow screen (console.css): each cell
// carries its column's label. `columns`: [{label, cell: (row) => node or text, field?}].
export function table(caption, columns, rows, { rowKey, empty = "Nothing here yet." } = {}) {
  if (rows.length === 0) return h("p", { class: "empty" }, empty);
  const head = h(
    "thead",
    {},
    h(
      "tr",
      {},
      columns.map((c) => h("th", { scope: "col" }, c.label)),
    ),
  );
  const body = h(
    "tbody",
    {},
    rows.map((row) =>
      h(
        "tr",
        { "data-key": rowKey ? rowKey(row) : null },
        // One element a cell: on a narrow screen the label and it are the cell's two columns.
        columns.map((c) =>
          h(
            "td",
            { "data-label": c.label, "data-field": c.field ?? null },
            h("div", { class: "cell" }, c.cell(row)),
          ),
        ),
      ),
    ),
  );
  return h(
    "div",
    { class: "table-wrap" },
    h("table", { class: "cards" }, h("caption", { class: "visually-hidden" }, caption), head, body),
  );
}

export function field(label, control, hint) {
  const id = control.id || `f-${Math.random().toString(36).slice(2, 10)}`;
  control.id = id;
  const hintId = hint ? `${id}-hint` : null;
  if (hintId) control.setAttribute("aria-describedby", hintId);
  return h(
    "div",
    { class: "field" },
    h("label", { for: id }, label),
    control,
    hint ? h("p", { class: "hint", id: hintId }, hint) : null,
  );
}

export function select(name, options, selected) {
  return h(
    "select",
    { name },
    options.map(([value, label]) => h("option", { value, selected: value === selected }, label)),
  );
}

// The console's message views: the messages (filtered, newest first, paged), one message's
// timeline, and the promise made visible (per day, and each duplicate blocked with its original).
// Everything shown comes from the API's answers, as text (dom.js).

import { api, every, part } from "./api.js";
import {
  badge,
  code,
  count,
  errorBox,
  excerpt,
  field,
  h,
  link,
  number,
  replace,
  select,
  statusLine,
  table,
  time,
} from "./dom.js";

export const STATUSES = [
  "accepted",
  "scheduled",
  "queued",
  "sending",
  "sent",
  "delivered",
  "failed",
  "canceled",
  "unknown",
  "expired",
];
export const CHANNELS = ["sms", "imessage", "email"];
// Until one of these, a message's timeline may still grow: its view keeps asking. A sent message
// may yet be delivered: asked after for a minute more, no longer (some providers never tell).
const MOVING = new Set(["accepted", "queued", "sending"]);
const SENT_POLLS = 30;
const PAGE_SIZE = 20;

function recipient(message) {
  return Array.isArray(message.to) ? message.to.join(", ") : String(message.to ?? "");
}

function content(message) {
  return message.subject ? `${message.subject} — ${message.body}` : message.body;
}

function refreshButton(load) {
  return h("button", { type: "button", class: "secondary", on: { click: () => load() } }, "Refresh");
}

// ------------------------------------------------------------------------------------ messages
export function messageList(ctx) {
  ctx.heading("Messages");
  const query = ctx.query;
  const statusControl = select(
    "status",
    [["", "Any status"], ...STATUSES.map((s) => [s, s])],
    query.get("status") ?? "",
  );
  const channelControl = select(
    "channel",
    [["", "Any channel"], ...CHANNELS.map((c) => [c, c])],
    query.get("channel") ?? "",
  );
  const toControl = h("input", {
    name: "to",
    type: "text",
    value: query.get("to") ?? "",
    autocomplete: "off",
  });
  const campaignControl = h("input", {
    name: "campaignId",
    type: "text",
    value: query.get("campaignId") ?? "",
    autocomplete: "off",
  });
  const form = h(
    "form",
    {
      class: "filters",
      "aria-label": "Filter the messages",
      on: {
        submit: (event) => {
          event.preventDefault();
          const wanted = new URLSearchParams();
          for (const [name, control] of [
            ["status", statusControl],
            ["channel", channelControl],
            ["to", toControl],
            ["campaignId", campaignControl],
          ]) {
            if (control.value.trim()) wanted.set(name, control.value.trim());
          }
          const hash = `#/messages${wanted.size ? `?${wanted}` : ""}`;
          if (location.hash === hash) load(0);
          else location.hash = hash; // the address keeps the filters: reload and back show them
        },
      },
    },
    field("Status", statusControl),
    field("Channel", channelControl),
    field("Recipient", toControl, "A phone number in any form, or an email address"),
    field("Campaign", campaignControl, "cmp_…"),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Apply filters")),
  );
  const status = statusLine("Loading the messages…");
  const results = h("div", { class: "results" });
  const newer = h("button", { type: "button", class: "secondary", disabled: true }, "Newer");
  const older = h("button", { type: "button", class: "secondary", disabled: true }, "Older");
  const cursors = [null]; // the cursor of each page shown so far: the first page has none
  let page = 0;
  newer.addEventListener("click", () => load(page - 1));
  older.addEventListener("click", () => load(page + 1));
  ctx.section.append(
    form,
    h(
      "div",
      { class: "toolbar" },
      status,
      refreshButton(() => load(page)),
    ),
    results,
    h("nav", { class: "pager", "aria-label": "Pages of messages" }, newer, older),
  );

  async function load(index) {
    status.textContent = "Loading the messages…";
    try {
      const { data } = await api("GET", "/v1/messages", {
        query: {
          limit: PAGE_SIZE,
          cursor: cursors[index],
          status: query.get("status"),
          channel: query.get("channel"),
          to: query.get("to"),
          campaignId: query.get("campaignId"),
        },
      });
      if (ctx.signal.aborted) return;
      page = index;
      cursors[index + 1] = data.nextCursor;
      cursors.length = index + 2;
      replace(results, messagesTable(data.messages, Boolean(data.nextCursor)));
      status.textContent = `Page ${page + 1}: ${count(data.messages.length, "message")}, newest first.`;
      newer.disabled = page === 0;
      older.disabled = !data.nextCursor;
    } catch (error) {
      if (ctx.signal.aborted) return;
      status.textContent = "";
      replace(results, errorBox(error));
    }
  }
  load(0);
}

function messagesTable(messages, more) {
  return table(
    "Messages, newest first",
    [
      { label: "Created", cell: (m) => time(m.createdAt) },
      { label: "Message", cell: (m) => link(["messages", m.id], code(m.id)) },
      { label: "Channel", cell: (m) => m.channel },
      { label: "To", cell: (m) => recipient(m) },
      { label: "Status", cell: (m) => badge(m.status), field: "status" },
      {
        label: "Content",
        field: "content",
        cell: (m) => h("span", { class: "content", title: content(m) }, excerpt(content(m))),
      },
    ],
    messages,
    {
      rowKey: (m) => m.id,
      // A filtered page reads a bounded stretch of messages: an empty one may still have older ones.
      empty: more ? "None in this stretch of messages: Older looks further back." : "No message matches.",
    },
  );
}

// ------------------------------------------------------------------------------------ timeline
export function timeline(ctx) {
  const id = ctx.parts[0];
  ctx.heading("Message timeline");
  // Not a live region: it is polled while the message moves.
  const status = h("p", { class: "status-line" }, "Loading the timeline…");
  const body = h("div", { class: "timeline-view" });
  ctx.section.append(
    h("p", { class: "back" }, h("a", { href: "#/messages" }, "← All messages")),
    h("p", {}, code(id)),
    h(
      "div",
      { class: "toolbar" },
      status,
      refreshButton(() => load()),
    ),
    body,
  );

  let polls = 0;
  async function load() {
    try {
      const { data } = await api("GET", `/v1/messages/${part(id)}/timeline`);
      if (ctx.signal.aborted) return false;
      replace(body, summary(data.message), h("h2", {}, "What happened"), entries(data.timeline));
      const at = new Date().toLocaleTimeString("en-GB");
      status.textContent = `${count(data.timeline.length, "entry", "entries")}, oldest first; updated ${at}.`;
      const pending = data.timeline.some((e) => e.kind === "webhook_delivery" && e.status === "pending");
      polls += 1;
      const sent = data.message.status === "sent" && polls <= SENT_POLLS;
      return MOVING.has(data.message.status) || pending || sent;
    } catch (error) {
      if (ctx.signal.aborted) return false;
      status.textContent = "";
      replace(body, errorBox(error));
      // Without its timeline, the message itself still shows.
      try {
        const { data } = await api("GET", `/v1/messages/${part(id)}`);
        if (!ctx.signal.aborted) body.append(summary(data.message));
      } catch {
        // the error above already says what went wrong
      }
      return false;
    }
  }
  load().then((moving) => {
    if (moving) every(ctx.signal, 2000, load);
  });
}

function summary(message) {
  const rows = [
    ["Status", badge(message.status)],
    ["Channel", message.channel],
    ["To", recipient(message)],
    ["Created", time(message.createdAt)],
    ["Updated", time(message.updatedAt)],
    ["Provider", message.provider ?? "none yet"],
    ["Attempts", number(message.attempts)],
  ];
  if (message.sendAt) rows.push(["Send at", time(message.sendAt)]);
  if (message.expiresAt) rows.push(["Expires", time(message.expiresAt)]);
  if (message.campaignId)
    rows.push([
      "Campaign",
      h("a", { href: `#/messages?campaignId=${encodeURIComponent(message.campaignId)}` }, message.campaignId),
    ]);
  if (message.template) rows.push(["Template", `${message.template.name} v${message.template.version}`]);
  if (message.idempotencyKey) rows.push(["Idempotency key", code(message.idempotencyKey)]);
  if (message.error) rows.push(["Error", `${message.error.code}: ${message.error.message}`]);
  return h(
    "section",
    { class: "summary", "aria-label": "The message" },
    h(
      "dl",
      { class: "facts" },
      rows.map(([term, value]) => h("div", {}, h("dt", {}, term), h("dd", {}, value))),
    ),
    message.subject ? h("p", {}, h("strong", {}, "Subject: "), message.subject) : null,
    h("pre", { class: "body", "aria-label": "The message's text" }, message.body),
    message.html
      ? h(
          "details",
          {},
          h("summary", {}, "HTML part (as its source)"),
          h("pre", { class: "body" }, message.html),
        )
      : null,
  );
}

const KINDS = {
  created: (e) => ["Created", " as ", badge(e.status)],
  status: (e) => [
    "Status ",
    badge(e.status),
    e.eventId ? [" ", h("span", { class: "muted" }, code(e.eventId))] : null,
  ],
  provider_attempt: (e) => ["Provider attempt: ", code(e.provider), " ", badge(e.outcome)],
  provider_event: (e) => ["Provider event: ", code(e.provider), " reported ", badge(e.type)],
  duplicate_blocked: (e) => [
    "Duplicate blocked: a send of the same content was answered with this message",
    e.eventId ? [" ", h("span", { class: "muted" }, code(e.eventId))] : null,
  ],
  webhook_delivery: (e) => [
    "Status webhook to ",
    code(e.endpointId),
    " ",
    badge(e.status),
    ` after ${count(e.attempts, "attempt")}`,
    e.responseStatus !== null && e.responseStatus !== undefined ? ` (HTTP ${e.responseStatus})` : "",
    e.eventId ? [" for ", h("span", { class: "muted" }, code(e.eventId))] : null,
  ],
};

function entries(list) {
  if (list.length === 0) return h("p", { class: "empty" }, "Nothing yet.");
  return h(
    "ol",
    { class: "timeline" },
    list.map((entry) =>
      h(
        "li",
        { class: `entry entry-${String(entry.kind).replace(/[^a-z_]/g, "")}`, "data-kind": entry.kind },
        time(entry.at),
        h("span", { class: "what" }, (KINDS[entry.kind] ?? ((e) => [String(e.kind)]))(entry)),
      ),
    ),
  );
}

// ------------------------------------------------------------------------------------ promise
const COUNTS = [
  ["newMessages", "New messages"],
  ["replays", "Replays answered"],
  ["duplicatesBlocked", "Duplicates blocked"],
  ["refusedSuppressed", "Refused as suppressed"],
];

export function promise(ctx) {
  ctx.heading("The promise");
  const daysControl = select(
    "days",
    [
      ["7", "7 days"],
      ["14", "14 days"],
      ["31", "31 days"],
    ],
    ctx.query.get("days") ?? "14",
  );
  daysControl.addEventListener("change", () => {
    location.hash = `#/promise?days=${encodeURIComponent(daysControl.value)}`;
  });
  const status = statusLine("Loading…");
  const days = h("div", { class: "days" });
  const duplicates = h("div", { class: "duplicates" });
  ctx.section.append(
    h(
      "p",
      { class: "intro" },
      "What sendonce did for this workspace's sends, per UTC day: each new message sent once, each retry " +
        "answered from its Idempotency-Key without sending again, each duplicate blocked, and each send " +
        "refused because its " +
        "recipient is suppressed. Counts may trail by a few seconds.",
    ),
    h(
      "div",
      { class: "toolbar" },
      field("Days shown", daysControl),
      status,
      refreshButton(() => load()),
    ),
    h("section", { "aria-labelledby": "per-day" }, h("h2", { id: "per-day" }, "Per day"), days),
    h(
      "section",
      { "aria-labelledby": "blocked", class: "blocked" },
      h("h2", { id: "blocked" }, "Duplicates blocked"),
      h(
        "p",
        {},
        "Each send the dedup guard answered with an earlier message instead of sending again: " +
          "the link is that original.",
      ),
      duplicates,
    ),
  );

  async function load() {
    status.textContent = "Loading…";
    const [perDay, blocked] = await Promise.allSettled([
      api("GET", "/v1/promise", { query: { days: daysControl.value } }),
      api("GET", "/v1/events", { query: { type: "message.duplicate_blocked", limit: 20 } }),
    ]);
    if (ctx.signal.aborted) return;
    status.textContent = `Updated ${new Date().toLocaleTimeString("en-GB")}.`;
    if (perDay.status === "fulfilled") replace(days, daysTable(perDay.value.data.days));
    else replace(days, errorBox(perDay.reason));
    if (blocked.status === "fulfilled") replace(duplicates, duplicateList(ctx, blocked.value.data));
    else replace(duplicates, errorBox(blocked.reason));
  }
  load();
}

function daysTable(days) {
  const totals = Object.fromEntries(
    COUNTS.map(([name]) => [name, days.reduce((sum, d) => sum + (d[name] ?? 0), 0)]),
  );
  return [
    h(
      "p",
      { class: "totals" },
      `In ${count(days.length, "day")}: `,
      COUNTS.map(([name, label], index) => [
        index ? ", " : "",
        h("strong", {}, number(totals[name])),
        ` ${label.toLowerCase()}`,
      ]),
      ".",
    ),
    table(
      "Per UTC day, newest first",
      [
        { label: "Day (UTC)", cell: (d) => h("time", { datetime: d.date }, d.date), field: "date" },
        ...COUNTS.map(([name, label]) => ({ label, field: name, cell: (d) => number(d[name]) })),
      ],
      days,
      { rowKey: (d) => d.date },
    ),
  ];
}

function duplicateList(ctx, first) {
  const list = h("ol", { class: "duplicate-list" });
  const more = h("button", { type: "button", class: "secondary" }, "More");
  let cursor = null;
  const add = (page) => {
    for (const event of page.events) {
      const original = event.data?.message;
      list.append(
        h(
          "li",
          {},
          time(event.timestamp),
          " — blocked a duplicate of ",
          original ? link(["messages", original.id], code(original.id)) : "an unknown message",
          original
            ? [
                ` (${original.channel} to ${recipient(original)}): `,
                h("span", { class: "content" }, excerpt(content(original), 80)),
              ]
            : null,
        ),
      );
    }
    cursor = page.nextCursor;
    more.hidden = !cursor;
  };
  more.addEventListener("click", async () => {
    try {
      const { data } = await api("GET", "/v1/events", {
        query: { type: "message.duplicate_blocked", limit: 20, cursor },
      });
      if (!ctx.signal.aborted) add(data);
    } catch (error) {
      more.replaceWith(errorBox(error));
    }
  });
  add(first);
  if (first.events.length === 0)
    return h("p", { class: "empty" }, "No duplicate blocked in the last 30 days.");
  return [list, more];
}

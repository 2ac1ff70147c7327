// The console's workspace views: status-webhook endpoints and their deliveries (redeliver), the
// suppression list (add, remove), templates with a live preview, campaigns with live progress,
// and usage against the quota and the rate limit. Everything shown comes from the API's answers,
// as text (dom.js).

import { api, every, part, rateFields } from "./api.js";
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
import { CHANNELS } from "./messages.js";

const EVENTS_SHOWN = 50;

function refreshButton(load) {
  return h("button", { type: "button", class: "secondary", on: { click: () => load() } }, "Refresh");
}

function updated() {
  return `Updated ${new Date().toLocaleTimeString("en-GB")}.`;
}

// ------------------------------------------------------------------------------------ webhooks
export function webhooks(ctx) {
  ctx.heading("Status webhooks");
  const failuresOnly = h("input", {
    type: "checkbox",
    id: "failures-only",
    name: "failures",
    checked: ctx.query.get("failures") === "1",
  });
  const status = statusLine("Loading…");
  const body = h("div", { class: "endpoints" });
  failuresOnly.addEventListener("change", () => load());
  ctx.section.append(
    h(
      "p",
      { class: "intro" },
      `Each endpoint's deliveries among the workspace's latest ${EVENTS_SHOWN} events. ` +
        "A failed or pending delivery can be sent again.",
    ),
    h(
      "div",
      { class: "toolbar" },
      h("div", { class: "check" }, failuresOnly, h("label", { for: "failures-only" }, "Failures only")),
      status,
      refreshButton(() => load()),
    ),
    body,
  );

  async function redeliver(eventId, endpointId, button) {
    button.disabled = true;
    try {
      await api("POST", `/v1/events/${part(eventId)}/redeliver`, { body: { endpointId } });
      const note = `Redelivery of ${eventId} to ${endpointId} queued.`;
      status.textContent = note;
      // A moment later, the delivery as it stands, and still the note of what was asked.
      setTimeout(async () => {
        if (ctx.signal.aborted) return;
        await load();
        if (!ctx.signal.aborted) status.textContent = `${note} ${updated()}`;
      }, 1500);
    } catch (error) {
      button.disabled = false;
      button.after(errorBox(error));
    }
  }

  async function load() {
    status.textContent = "Loading…";
    try {
      const [endpoints, events] = await Promise.all([
        api("GET", "/v1/webhook-endpoints"),
        api("GET", "/v1/events", { query: { limit: EVENTS_SHOWN } }),
      ]);
      if (ctx.signal.aborted) return;
      const list = endpoints.data.endpoints;
      if (list.length === 0) {
        replace(
          body,
          h(
            "p",
            { class: "empty" },
            "No status-webhook endpoint yet: add one with POST /v1/webhook-endpoints.",
          ),
        );
      } else {
        replace(
          body,
          list.map((endpoint) =>
            endpointSection(endpoint, events.data.events, failuresOnly.checked, redeliver),
          ),
        );
      }
      status.textContent = updated();
    } catch (error) {
      if (ctx.signal.aborted) return;
      status.textContent = "";
      replace(body, errorBox(error));
    }
  }
  load();
}

function endpointSection(endpoint, events, failuresOnly, redeliver) {
  const rows = [];
  for (const event of events) {
    for (const delivery of event.deliveries ?? []) {
      if (delivery.endpointId === endpoint.id) rows.push({ event, delivery });
    }
  }
  const failed = rows.filter((r) => r.delivery.status === "failed").length;
  const pending = rows.filter((r) => r.delivery.status === "pending").length;
  const shown = failuresOnly ? rows.filter((r) => r.delivery.status !== "succeeded") : rows;
  const headingId = `endpoint-${endpoint.id.replace(/[^A-Za-z0-9_-]/g, "")}`;
  return h(
    "section",
    { class: "endpoint", "aria-labelledby": headingId },
    h("h2", { id: headingId }, endpoint.url),
    h(
      "p",
      { class: "meta" },
      code(endpoint.id),
      endpoint.description ? ` — ${endpoint.description}` : "",
      ` · ${endpoint.eventTypes ? endpoint.eventTypes.join(", ") : "every event type"} · since `,
      time(endpoint.createdAt),
    ),
    h(
      "p",
      { class: failed ? "warning" : "" },
      `${count(rows.length, "recent delivery", "recent deliveries")}: `,
      h("strong", {}, number(failed)),
      " failed, ",
      number(pending),
      " pending.",
    ),
    table(
      `Deliveries to ${endpoint.url}`,
      [
        { label: "Event", cell: (r) => [time(r.event.timestamp), " ", r.event.type] },
        {
          label: "Message",
          cell: (r) =>
            r.event.data?.message
              ? link(["messages", r.event.data.message.id], code(r.event.data.message.id))
              : "—",
        },
        { label: "Delivery", cell: (r) => badge(r.delivery.status), field: "delivery" },
        { label: "Attempts", cell: (r) => number(r.delivery.attempts) },
        { label: "Last attempt", cell: (r) => time(r.delivery.lastAttemptAt) },
        { label: "Response", cell: (r) => r.delivery.lastResponseStatus ?? "none" },
        {
          label: "Action",
          cell: (r) => {
            const button = h(
              "button",
              {
                type: "button",
                class: "secondary",
                "aria-label": `Redeliver ${r.event.id} to ${endpoint.id}`,
              },
              "Redeliver",
            );
            button.addEventListener("click", () => redeliver(r.event.id, endpoint.id, button));
            return button;
          },
        },
      ],
      shown,
      {
        rowKey: (r) => r.event.id,
        empty: failuresOnly ? "No failed or pending delivery." : "No delivery yet.",
      },
    ),
  );
}

// ------------------------------------------------------------------------------------ suppressions
export function suppressions(ctx) {
  ctx.heading("Suppressions");
  const channel = select(
    "channel",
    CHANNELS.map((c) => [c, c]),
    "sms",
  );
  const to = h("input", { name: "to", type: "text", required: true, autocomplete: "off" });
  const outcome = h("div", { class: "outcome" });
  const status = statusLine("Loading…");
  const body = h("div", {});
  const more = h("button", { type: "button", class: "secondary", hidden: true }, "More");
  let cursor = null;
  const add = h(
    "form",
    {
      class: "inline-form",
      "aria-label": "Add a suppression",
      on: {
        submit: async (event) => {
          event.preventDefault();
          try {
            const answer = await api("POST", "/v1/suppressions", {
              body: { channel: channel.value, to: to.value.trim() },
            });
            const entry = answer.data.suppression;
            replace(
              outcome,
              statusLine(`${entry.to} is suppressed (${entry.reason}): every send to it is refused.`),
            );
            to.value = "";
            load();
          } catch (error) {
            replace(outcome, errorBox(error));
          }
        },
      },
    },
    field("Channel", channel),
    field("Recipient", to, "A phone number with its country code, or an email address"),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Add suppression")),
  );
  more.addEventListener("click", () => load(cursor));
  ctx.section.append(
    h(
      "p",
      { class: "intro" },
      "Recipients this workspace never sends to: opted out, bounced, complained, or added here.",
    ),
    h(
      "section",
      { "aria-labelledby": "add-suppression" },
      h("h2", { id: "add-suppression" }, "Add"),
      add,
      outcome,
    ),
    h(
      "section",
      { "aria-labelledby": "suppressed" },
      h("h2", { id: "suppressed" }, "Suppressed recipients"),
      h(
        "div",
        { class: "toolbar" },
        status,
        refreshButton(() => load()),
      ),
      body,
      more,
    ),
  );

  async function remove(entry, button) {
    button.disabled = true;
    try {
      await api("DELETE", `/v1/suppressions/${part(entry.to)}`);
      replace(outcome, statusLine(`${entry.to} was removed: sends to it are allowed again.`));
      load();
    } catch (error) {
      button.disabled = false;
      replace(outcome, errorBox(error));
    }
  }

  async function load(after = null) {
    status.textContent = "Loading…";
    try {
      const { data } = await api("GET", "/v1/suppressions", { query: { limit: 50, cursor: after } });
      if (ctx.signal.aborted) return;
      const shown = table(
        "Suppressed recipients",
        [
          { label: "Recipient", cell: (s) => s.to, field: "to" },
          { label: "Reason", cell: (s) => badge(s.reason) },
          { label: "Since", cell: (s) => time(s.createdAt) },
          {
            label: "Message",
            cell: (s) => (s.messageId ? link(["messages", s.messageId], code(s.messageId)) : "—"),
          },
          {
            label: "Action",
            cell: (s) => {
              const button = h(
                "button",
                { type: "button", class: "secondary", "aria-label": `Remove ${s.to}` },
                "Remove",
              );
              button.addEventListener("click", () => remove(s, button));
              return button;
            },
          },
        ],
        data.suppressions,
        { rowKey: (s) => s.to, empty: "No recipient is suppressed." },
      );
      if (after) body.append(shown);
      else replace(body, shown);
      cursor = data.nextCursor;
      more.hidden = !cursor;
      status.textContent = updated();
    } catch (error) {
      if (ctx.signal.aborted) return;
      status.textContent = "";
      replace(body, errorBox(error));
    }
  }
  load();
}

// ------------------------------------------------------------------------------------ templates
// `{{ name }}` and `{{ name.part }}` of a template: a first guess at the data its preview needs.
function variables(...texts) {
  const names = new Set();
  for (const text of texts) {
    for (const found of String(text ?? "").matchAll(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)/g)) names.add(found[1]);
  }
  return Object.fromEntries([...names].map((name) => [name, ""]));
}

export function templates(ctx) {
  ctx.heading("Templates");
  const status = statusLine("Loading…");
  const list = h("div", {});
  const preview = h("section", { class: "preview", "aria-labelledby": "preview-heading" });
  ctx.section.append(
    h(
      "p",
      { class: "intro" },
      "The workspace's templates, each at its latest version. Choose one to render it with your data.",
    ),
    h(
      "div",
      { class: "toolbar" },
      status,
      refreshButton(() => load()),
    ),
    list,
    preview,
  );

  async function load() {
    status.textContent = "Loading…";
    try {
      const { data } = await api("GET", "/v1/templates", { query: { limit: 100 } });
      if (ctx.signal.aborted) return;
      replace(
        list,
        table(
          "Templates",
          [
            { label: "Name", cell: (t) => code(t.name), field: "name" },
            { label: "Channel", cell: (t) => t.channel },
            { label: "Version", cell: (t) => number(t.version) },
            { label: "Created", cell: (t) => time(t.createdAt) },
            { label: "Body", cell: (t) => h("span", { class: "content" }, excerpt(t.body, 80)) },
            {
              label: "Preview",
              cell: (t) =>
                h(
                  "button",
                  {
                    type: "button",
                    class: "secondary",
                    "aria-label": `Preview ${t.name}`,
                    on: { click: () => showPreview(ctx, preview, t) },
                  },
                  "Preview",
                ),
            },
          ],
          data.templates,
          { rowKey: (t) => t.name, empty: "No template yet: create one with POST /v1/templates." },
        ),
      );
      status.textContent = updated();
      const wanted = ctx.query.get("name");
      const chosen = data.templates.find((t) => t.name === wanted) ?? data.templates[0];
      if (chosen && !preview.hasChildNodes()) showPreview(ctx, preview, chosen, false);
    } catch (error) {
      if (ctx.signal.aborted) return;
      status.textContent = "";
      replace(list, errorBox(error));
    }
  }
  load();
}

function showPreview(ctx, preview, template, focus = true) {
  const heading = h("h2", { id: "preview-heading", tabindex: "-1" }, `Preview: ${template.name}`);
  const data = h("textarea", { name: "data", rows: "6", spellcheck: "false" });
  data.value = JSON.stringify(variables(template.subject, template.body, template.html), null, 2);
  const version = h("input", {
    name: "version",
    type: "number",
    min: "1",
    max: String(template.version),
    inputmode: "numeric",
  });
  const problem = h("div", {});
  const rendered = h("div", { class: "rendered", "aria-live": "polite" });
  let timer = null;
  let asked = 0;

  async function render() {
    const mine = ++asked; // an older answer arriving late never replaces a newer one
    let values;
    try {
      values = JSON.parse(data.value || "{}");
    } catch (error) {
      replace(problem, errorBox({ code: "invalid_json", message: `The data is not JSON: ${error.message}` }));
      return;
    }
    try {
      const body = { data: values };
      if (version.value) body.version = Number(version.value);
      const answer = await api("POST", `/v1/templates/${part(template.name)}/render`, { body });
      if (ctx.signal.aborted || mine !== asked) return;
      replace(problem);
      replace(rendered, renderedView(answer.data));
    } catch (error) {
      if (ctx.signal.aborted || mine !== asked) return;
      replace(problem, errorBox(error));
    }
  }
  const soon = () => {
    clearTimeout(timer);
    timer = setTimeout(render, 250);
  };
  data.addEventListener("input", soon);
  version.addEventListener("input", soon);
  replace(
    preview,
    heading,
    h(
      "div",
      { class: "preview-grid" },
      h(
        "div",
        {},
        h("h3", {}, `Source (version ${template.version}, ${template.channel})`),
        template.subject ? h("pre", { class: "body" }, `Subject: ${template.subject}`) : null,
        h("pre", { class: "body" }, template.body),
        template.html
          ? h("details", {}, h("summary", {}, "HTML part"), h("pre", { class: "body" }, template.html))
          : null,
        field("Data (JSON)", data, "The preview renders as you type."),
        field("Version", version, `Empty: the latest (${template.version}).`),
      ),
      h("div", {}, h("h3", {}, "Rendered"), problem, rendered),
    ),
  );
  if (focus) heading.focus();
  render();
}

function renderedView(answer) {
  const out = answer.rendered;
  return [
    out.subject !== null && out.subject !== undefined
      ? h("pre", { class: "body" }, `Subject: ${out.subject}`)
      : null,
    h("pre", { class: "body", "data-field": "rendered-body" }, out.body),
    out.html
      ? h("details", {}, h("summary", {}, "HTML part (as its source)"), h("pre", { class: "body" }, out.html))
      : null,
    answer.sms
      ? h(
          "p",
          { class: "meta" },
          `sms: ${answer.sms.encoding}, ${count(answer.sms.segments, "segment")}`,
          answer.sms.nonGsmCharacters.length
            ? ` (outside GSM-7: ${answer.sms.nonGsmCharacters.join(" ")})`
            : "",
        )
      : null,
  ];
}

// ------------------------------------------------------------------------------------ campaigns
const POLL_MS = 3000;

const CAMPAIGN_COLUMNS = [
  { label: "Name", cell: (c) => [h("strong", {}, c.name), h("br"), code(c.id)] },
  { label: "Channel", cell: (c) => c.channel },
  {
    label: "Status",
    cell: (c) => [badge(c.status), c.pausedReason ? ` (${c.pausedReason})` : ""],
    field: "status",
  },
  { label: "Progress", cell: (c) => progress(c), field: "progress" },
  { label: "Counts", cell: (c) => counts(c.counts), field: "counts" },
  { label: "Started", cell: (c) => time(c.startedAt), field: "started" },
  {
    label: "Messages",
    cell: (c) => h("a", { href: `#/messages?campaignId=${encodeURIComponent(c.id)}` }, "Its messages"),
  },
];

export function campaigns(ctx) {
  ctx.heading("Campaigns");
  // Not a live region: a poll every few seconds would be read out every few seconds.
  const status = h("p", { class: "status-line" }, "Loading…");
  const body = h("div", {});
  ctx.section.append(
    h(
      "p",
      { class: "intro" },
      `Progress refreshes every ${POLL_MS / 1000} seconds while this view is shown and the tab visible.`,
    ),
    h(
      "div",
      { class: "toolbar" },
      status,
      refreshButton(() => load()),
    ),
    body,
  );

  // The same campaigns as shown: only their changing cells are rewritten, so a poll never takes
  // the focus from a link in the table.
  function show(list) {
    const rows = [...body.querySelectorAll("tbody tr")];
    const same = rows.length === list.length && rows.every((row, i) => row.dataset.key === list[i].id);
    if (!same) {
      replace(
        body,
        table("Campaigns, newest first", CAMPAIGN_COLUMNS, list, {
          rowKey: (c) => c.id,
          empty: "No campaign yet.",
        }),
      );
      return;
    }
    list.forEach((campaign, i) => {
      for (const column of CAMPAIGN_COLUMNS.filter((c) => c.field)) {
        replace(rows[i].querySelector(`td[data-field="${column.field}"] > .cell`), column.cell(campaign));
      }
    });
  }

  async function load() {
    try {
      const { data } = await api("GET", "/v1/campaigns", { query: { limit: 50 } });
      if (ctx.signal.aborted) return;
      show(data.campaigns);
      status.textContent = updated();
    } catch (error) {
      if (ctx.signal.aborted) return;
      status.textContent = "";
      replace(body, errorBox(error));
    }
  }
  // Polled while the view is shown; `every` skips a hidden tab's turns.
  load().then(() => every(ctx.signal, POLL_MS, load));
}

function progress(campaign) {
  const c = campaign.counts;
  const done = c.sent + c.failed;
  const wanted = Math.max(c.accepted, 1);
  const labelId = `progress-${campaign.id.replace(/[^A-Za-z0-9_-]/g, "")}`;
  const percent = c.accepted ? Math.round((100 * done) / c.accepted) : 0;
  return h(
    "div",
    { class: "progress" },
    h("progress", { max: String(wanted), value: String(Math.min(done, wanted)), "aria-labelledby": labelId }),
    h("span", { id: labelId }, `${percent}% sent (${number(done)} of ${number(c.accepted)})`),
  );
}

function counts(c) {
  return h(
    "span",
    { class: "counts" },
    `${number(c.total)} recipients · ${number(c.delivered)} delivered · ${number(c.failed)} failed · ` +
      `${number(c.duplicates)} duplicates · ${number(c.suppressed)} suppressed · ` +
      `${number(c.invalid)} invalid`,
  );
}

// ------------------------------------------------------------------------------------ usage
export function usage(ctx) {
  ctx.heading("Usage");
  const status = statusLine("Loading…");
  const body = h("div", { class: "usage" });
  ctx.section.append(
    h(
      "div",
      { class: "toolbar" },
      status,
      refreshButton(() => load()),
    ),
    body,
  );

  async function load() {
    status.textContent = "Loading…";
    try {
      const { data, headers } = await api("GET", "/v1/usage");
      if (ctx.signal.aborted) return;
      const { quota, rateLimit, sendControls } = data;
      const cap = sendControls.frequencyCap;
      const left = rateFields(headers.get("RateLimit"));
      const policy = rateFields(headers.get("RateLimit-Policy"));
      const used = quota.daily ? Math.round((100 * quota.usedToday) / quota.daily) : 100;
      replace(
        body,
        h(
          "section",
          { class: "card", "aria-labelledby": "quota" },
          h("h2", { id: "quota" }, "Daily send quota"),
          h(
            "div",
            { class: "meter" },
            h("meter", {
              id: "quota-meter",
              min: "0",
              max: String(Math.max(quota.daily, 1)),
              value: String(quota.usedToday),
              high: String(Math.floor(quota.daily * 0.8)),
              optimum: "0",
            }),
            h(
              "label",
              { for: "quota-meter" },
              `${number(quota.usedToday)} of ${number(quota.daily)} new messages today (${used}%)`,
            ),
          ),
          h("p", {}, "Resets at ", time(quota.resetsAt), ". A replay or a duplicate costs nothing."),
        ),
        h(
          "section",
          { class: "card", "aria-labelledby": "rate" },
          h("h2", { id: "rate" }, "Request rate"),
          h(
            "p",
            {},
            h("strong", {}, number(rateLimit.perSecond)),
            " requests a second, sustained (bursts to twice that).",
          ),
          "r" in left
            ? h(
                "p",
                {},
                `This window: about ${number(left.r)} of ${number(policy.q)} requests left, ` +
                  `for ${count(left.t, "more second")} (window ${number(policy.w)} s).`,
              )
            : h("p", { class: "muted" }, "No RateLimit field on this answer."),
        ),
        h(
          "section",
          { class: "card", "aria-labelledby": "controls" },
          h("h2", { id: "controls" }, "Send controls"),
          h(
            "dl",
            { class: "facts" },
            h(
              "div",
              {},
              h("dt", {}, "Frequency cap"),
              h(
                "dd",
                {},
                cap ? `${number(cap.perRecipient)} per recipient in ${number(cap.windowSeconds)} s` : "none",
              ),
            ),
            h(
              "div",
              {},
              h("dt", {}, "Quiet hours"),
              h("dd", {}, sendControls.quietHours ? sendControls.quietHours.hours : "none"),
            ),
            h("div", {}, h("dt", {}, "Time zone"), h("dd", {}, sendControls.timezone)),
          ),
        ),
      );
      status.textContent = updated();
    } catch (error) {
      if (ctx.signal.aborted) return;
      status.textContent = "";
      replace(body, errorBox(error));
    }
  }
  load();
}

// A backend in TypeScript's place (plain Node 20, no packages): what an app's server does with push-api over
// fetch(). It creates users in three time zones, registers their devices (an APNs token, an FCM token, an FCM
// installation id), records entries for some, calls the content-limit hook, and prints, one per line, the user
// ids that a reminder run at NOW must remind: scripts/api-node-check runs that run and compares.
//   API=http://127.0.0.1:8080 KEY=dpk_… NOW=2026-11-21T20:00:00Z node Examples/node-backend/backend.mjs
const api = process.env.API;
const key = process.env.KEY;
const now = new Date(process.env.NOW ?? "2026-11-21T20:00:00Z");
if (!api || !key) {
  console.error("set API and KEY");
  process.exit(64);
}

async function call(method, path, body, headers = {}) {
  const response = await fetch(api + path, {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body ? { "Content-Type": "application/json" } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  if (!response.ok) {
    throw new Error(`${method} ${path}: ${response.status} ${text}`);
  }
  return text ? JSON.parse(text) : null;
}

// The local reminder time that is "now" in each zone at NOW: these users are due.
function localTime(zone) {
  const parts = new Intl.DateTimeFormat("en-GB", { timeZone: zone, hour: "2-digit", minute: "2-digit", hourCycle: "h23" })
    .formatToParts(now);
  const get = (type) => parts.find((part) => part.type === type).value;
  return `${get("hour")}:${get("minute")}`;
}

const hex = (n) => [...Array(64)].map((_, i) => "0123456789abcdef"[(i * 7 + n) % 16]).join("");
const zones = ["Asia/Tokyo", "Europe/Berlin", "America/New_York"];
const expected = [];
let n = 0;
for (const zone of zones) {
  for (const kind of ["writes", "silent", "later", "off"]) {
    n += 1;
    const id = `node-${zone.split("/")[1].toLowerCase()}-${kind}`;
    const due = localTime(zone);
    const [h, m] = due.split(":").map(Number);
    const reminderTime = kind === "later" ? `${String((h + 2) % 24).padStart(2, "0")}:${String(m).padStart(2, "0")}` : due;
    const user = await call("PUT", `/v1/users/${encodeURIComponent(id)}`, {
      timezone: zone, locale: zone === "Asia/Tokyo" ? "ja" : "en", reminder_time: reminderTime,
      reminders: kind !== "off",
    });
    if (!user.created) throw new Error(`${id}: not created`);
    const device = n % 3 === 0
      ? { token: hex(n), provider: "apns", platform: "ios" }
      : n % 3 === 1
        ? { token: `fcm-token-${id}-${"x".repeat(100)}`, provider: "fcm", platform: "android" }
        : { fid: `c${"ABCDEFGHIJKLMNOPQRSTU".slice(0, 21 - String(n).length)}${n}`, platform: "android" };
    const registered = await call("POST", `/v1/users/${encodeURIComponent(id)}/devices`, device);
    if (registered.change !== "created") throw new Error(`${id}: device ${registered.change}`);
    if (kind === "writes") {
      // Retried as a flaky network would: the same Idempotency-Key records one entry.
      for (let attempt = 0; attempt < 2; attempt++) {
        await call("POST", `/v1/users/${encodeURIComponent(id)}/entries`, { at: new Date(now - 3600_000).toISOString() },
          { "Idempotency-Key": `entry-${id}` });
      }
    }
    if (kind === "silent") expected.push(id);
  }
}
// The hook on a write that crosses 90 % of a free plan's quota warns once; the next write below 100 % does not.
const first = await call("POST", "/v1/hooks/content-limit", { user_id: "node-tokyo-writes", used: 27, limit: 30 });
const second = await call("POST", "/v1/hooks/content-limit", { user_id: "node-tokyo-writes", used: 28, limit: 30 });
if (first.action !== "sent" || second.action !== "none") {
  throw new Error(`hook: ${first.action}, then ${second.action}`);
}
console.log(expected.sort().join("\n"));

// Talking to this origin only: JSON GETs/POSTs and A2A streams (server-sent events over fetch).

const TOKEN_KEY = "a2a-node-console:token";

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) || "",
  set: (value) => (value ? sessionStorage.setItem(TOKEN_KEY, value) : sessionStorage.removeItem(TOKEN_KEY)),
};

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function headers(extra = {}) {
  const out = { Accept: "application/json", "A2A-Version": "1.0", ...extra };
  const secret = token.get();
  if (secret) out.Authorization = `Bearer ${secret}`;
  return out;
}

async function failure(response) {
  let detail = response.statusText || "request failed";
  try {
    const body = await response.json();
    const error = body.error ?? body;
    detail = (typeof error === "string" ? error : error.message || error.detail) || JSON.stringify(body);
  } catch {
    /* not JSON: keep the status text */
  }
  if (response.status === 401 || response.status === 403) {
    detail += " — enter an access token above";
  }
  return new ApiError(response.status, `${response.status}: ${detail}`);
}

export async function getJSON(path, params = {}) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  const response = await fetch(url, { headers: headers(), cache: "no-store" });
  if (!response.ok) throw await failure(response);
  return response.json();
}

// An A2A stream: yields each event's JSON (a StreamResponse: task, statusUpdate, artifactUpdate,
// message). `signal` stops it.
export async function* stream(path, { method = "GET", body, signal } = {}) {
  const init = { method, signal, headers: headers({ Accept: "text/event-stream" }) };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(new URL(path, location.origin), init);
  if (!response.ok) throw await failure(response);
  const type = response.headers.get("content-type") || "";
  if (!type.startsWith("text/event-stream")) {
    yield await response.json(); // an answer that is not a stream (an error as JSON, a task)
    return;
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""))
          .join("\n");
        if (data) yield JSON.parse(data);
      }
    }
  } finally {
    reader.releaseLock();
  }
}

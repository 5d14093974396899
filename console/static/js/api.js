// The console's only way to the server: same origin, the operator's bearer token on every
// request, structured errors ({code, message}) raised as ApiError.

const TOKEN_KEY = "doraforge.console.token";

export class ApiError extends Error {
  constructor(status, error) {
    super(error.message);
    this.status = status;
    this.code = error.code;
    this.details = error.details || {};
    this.retryable = Boolean(error.retryable);
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(extra = {}) {
  const sent = { ...extra };
  const value = token();
  if (value) sent.Authorization = `Bearer ${value}`;
  return sent;
}

async function failure(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const error = (body && body.error) || {
    code: `HTTP_${response.status}`,
    message: response.statusText || "request failed",
  };
  return new ApiError(response.status, error);
}

export async function request(path, { method = "GET", body, signal } = {}) {
  const init = { method, headers: headers(), signal, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await failure(response);
  return response;
}

export async function getJson(path, options) {
  return (await request(path, options)).json();
}

export async function postJson(path, body = {}, options = {}) {
  return (await request(path, { ...options, method: "POST", body })).json();
}

export async function getBlob(path, options) {
  return (await request(path, options)).blob();
}

export function enc(value) {
  return encodeURIComponent(value);
}

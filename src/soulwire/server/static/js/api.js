// @ts-check
// The HTTP API. The browser's cookie carries the server token; a read-only share link instead
// carries an observer token, sent as a bearer header (and never stored beyond this tab).

const OBSERVER_KEY = 'soulwire.observer';

/** @typedef {{sessionId: string, token: string}} ObserverToken */

/** The observer token this tab holds (a read-only share link), if any. @returns {ObserverToken | null} */
export function observerToken() {
  try { return JSON.parse(sessionStorage.getItem(OBSERVER_KEY) || 'null'); } catch { return null; }
}

/** @param {string} sessionId @param {string} token */
export function setObserverToken(sessionId, token) {
  sessionStorage.setItem(OBSERVER_KEY, JSON.stringify({sessionId, token}));
}

export class ApiError extends Error {
  /** @param {number} status @param {any} detail the response's `detail` (a message, or structured) */
  constructor(status, detail) {
    super(typeof detail === 'string' ? detail : detail?.message || JSON.stringify(detail));
    this.status = status;
    this.detail = detail;
  }
}

/**
 * One API call; the JSON answer (null for none), or an ApiError with the server's detail.
 * @param {string} method @param {string} path @param {unknown} [body] JSON, or with `raw` the bytes
 * @param {{raw?: boolean, headers?: Record<string, string>}} [options]
 * @returns {Promise<any>}
 */
export async function api(method, path, body, {raw = false, headers = {}} = {}) {
  /** @type {Record<string, string>} */
  const sent = {...headers};
  /** @type {RequestInit} */
  const init = {method, headers: sent, credentials: 'same-origin'};
  const observer = observerToken();
  if (observer) sent.Authorization = `Bearer ${observer.token}`;
  if (body !== undefined) {
    if (raw) init.body = /** @type {BodyInit} */ (body);
    else { init.body = JSON.stringify(body); sent['Content-Type'] = 'application/json'; }
  }
  const response = await fetch(path, init);
  if (response.status === 204) return null;
  const text = await response.text();
  /** @type {any} */
  let data;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!response.ok) throw new ApiError(response.status, data?.detail ?? data ?? response.statusText);
  return data;
}

/** @typedef {string | number | boolean | null | undefined} QueryValue */

export const sessions = {
  /** @param {string} [workDir] @param {boolean} [archived] */
  list: (workDir, archived) => api('GET', `/api/sessions${query({work_dir: workDir, archived})}`),
  /** @param {string} id */
  get: id => api('GET', `/api/sessions/${id}`),
  /** @param {Record<string, unknown>} body */
  create: body => api('POST', '/api/sessions', body),
  /** @param {string} id @param {string} title */
  rename: (id, title) => api('PATCH', `/api/sessions/${id}`, {title}),
  /** @param {string} id @param {boolean} archived */
  archive: (id, archived) => api('PATCH', `/api/sessions/${id}`, {archived}),
  /** @param {string} id */
  fork: id => api('POST', `/api/sessions/${id}/fork`, {}),
  /** @param {string} id */
  remove: id => api('DELETE', `/api/sessions/${id}`),
  /** @param {string} id @param {number} [since] @param {number} [limit] @param {number} [maxRecordBytes] */
  records: (id, since = 0, limit = 1000000, maxRecordBytes) => api('GET', `/api/sessions/${id}/records${query({since, limit, max_record_bytes: maxRecordBytes})}`),
  /** @param {string} id */
  observerToken: id => api('POST', `/api/sessions/${id}/observer-tokens`),
  /** @param {string} id */
  gitDiff: id => api('GET', `/api/sessions/${id}/git-diff`),
  /** @param {string} id @param {File} file */
  upload: (id, file) => api('POST', `/api/sessions/${id}/uploads?name=${encodeURIComponent(file.name)}`, file,
    {raw: true, headers: {'Content-Type': 'application/octet-stream'}}),
  /** @param {string} id @param {string} path @param {number} [line] */
  open: (id, path, line) => api('POST', `/api/sessions/${id}/open`, {path, line}),
  /** @param {string} q @param {string} [workDir] @param {boolean} [archived] */
  search: (q, workDir, archived) => api('GET', `/api/web/search${query({q, work_dir: workDir, archived})}`),
};

/** `?a=1&b=2` of the members that are set (undefined and null are left out). */
/** @param {Record<string, QueryValue>} params */
function query(params) {
  const pairs = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== '');
  return pairs.length ? `?${pairs.map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`).join('&')}` : '';
}

export const web = {
  models: () => api('GET', '/api/models'),
  workDirs: () => api('GET', '/api/web/work-dirs'),
  config: () => api('GET', '/api/web/config'),
  /** @param {string} text */
  saveConfig: text => api('PUT', '/api/web/config', {text}),
  configForm: () => api('GET', '/api/web/config/form'),
  /** @param {Record<string, unknown>} values */
  saveConfigForm: values => api('PUT', '/api/web/config/form', {values}),
  /** @param {string} id */
  blob: id => api('GET', `/api/blobs/${id}`),
  /** Who this token is: `{user, role}` (user null: the server's single token). */
  me: () => api('GET', '/api/me'),
  /** The audit trail (admins). @param {{session_id?: string, user?: string, since?: number}} filters */
  audit: filters => api('GET', `/api/audit${query(filters)}`),
  /** @param {string} id @param {string} user */
  share: (id, user) => api('POST', `/api/sessions/${encodeURIComponent(id)}/share`, {user}),
};

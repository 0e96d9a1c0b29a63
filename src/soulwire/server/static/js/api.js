// The HTTP API. The browser's cookie carries the server token; a read-only share link instead
// carries an observer token, sent as a bearer header (and never stored beyond this tab).

const OBSERVER_KEY = 'soulwire.observer';

export function observerToken() {
  try { return JSON.parse(sessionStorage.getItem(OBSERVER_KEY) || 'null'); } catch { return null; }
}

export function setObserverToken(sessionId, token) {
  sessionStorage.setItem(OBSERVER_KEY, JSON.stringify({sessionId, token}));
}

export class ApiError extends Error {
  constructor(status, detail) {
    super(typeof detail === 'string' ? detail : detail?.message || JSON.stringify(detail));
    this.status = status;
    this.detail = detail;
  }
}

export async function api(method, path, body, {raw = false, headers = {}} = {}) {
  const init = {method, headers: {...headers}, credentials: 'same-origin'};
  const observer = observerToken();
  if (observer) init.headers.Authorization = `Bearer ${observer.token}`;
  if (body !== undefined) {
    if (raw) init.body = body;
    else { init.body = JSON.stringify(body); init.headers['Content-Type'] = 'application/json'; }
  }
  const response = await fetch(path, init);
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!response.ok) throw new ApiError(response.status, data?.detail ?? data ?? response.statusText);
  return data;
}

export const sessions = {
  list: (workDir, archived) => api('GET', `/api/sessions${query({work_dir: workDir, archived})}`),
  get: id => api('GET', `/api/sessions/${id}`),
  create: body => api('POST', '/api/sessions', body),
  rename: (id, title) => api('PATCH', `/api/sessions/${id}`, {title}),
  archive: (id, archived) => api('PATCH', `/api/sessions/${id}`, {archived}),
  fork: id => api('POST', `/api/sessions/${id}/fork`, {}),
  remove: id => api('DELETE', `/api/sessions/${id}`),
  records: (id, since = 0, limit = 1000000, maxRecordBytes) => api('GET', `/api/sessions/${id}/records${query({since, limit, max_record_bytes: maxRecordBytes})}`),
  observerToken: id => api('POST', `/api/sessions/${id}/observer-tokens`),
  gitDiff: id => api('GET', `/api/sessions/${id}/git-diff`),
  upload: (id, file) => api('POST', `/api/sessions/${id}/uploads?name=${encodeURIComponent(file.name)}`, file,
    {raw: true, headers: {'Content-Type': 'application/octet-stream'}}),
  open: (id, path, line) => api('POST', `/api/sessions/${id}/open`, {path, line}),
  search: (q, workDir, archived) => api('GET', `/api/web/search${query({q, work_dir: workDir, archived})}`),
};

/** `?a=1&b=2` of the members that are set (undefined and null are left out). */
function query(params) {
  const pairs = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== '');
  return pairs.length ? `?${pairs.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&')}` : '';
}

export const web = {
  models: () => api('GET', '/api/models'),
  workDirs: () => api('GET', '/api/web/work-dirs'),
  config: () => api('GET', '/api/web/config'),
  saveConfig: text => api('PUT', '/api/web/config', {text}),
  configForm: () => api('GET', '/api/web/config/form'),
  saveConfigForm: values => api('PUT', '/api/web/config/form', {values}),
  blob: id => api('GET', `/api/blobs/${id}`),
};

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
    super(typeof detail === 'string' ? detail : JSON.stringify(detail));
    this.status = status;
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
  list: workDir => api('GET', `/api/sessions${workDir ? `?work_dir=${encodeURIComponent(workDir)}` : ''}`),
  get: id => api('GET', `/api/sessions/${id}`),
  create: body => api('POST', '/api/sessions', body),
  rename: (id, title) => api('PATCH', `/api/sessions/${id}`, {title}),
  fork: id => api('POST', `/api/sessions/${id}/fork`, {}),
  remove: id => api('DELETE', `/api/sessions/${id}`),
  records: (id, since = 0, limit = 1000000) => api('GET', `/api/sessions/${id}/records?since=${since}&limit=${limit}`),
  observerToken: id => api('POST', `/api/sessions/${id}/observer-tokens`),
  gitDiff: id => api('GET', `/api/sessions/${id}/git-diff`),
  upload: (id, file) => api('POST', `/api/sessions/${id}/uploads?name=${encodeURIComponent(file.name)}`, file,
    {raw: true, headers: {'Content-Type': 'application/octet-stream'}}),
  open: (id, path, line) => api('POST', `/api/sessions/${id}/open`, {path, line}),
  search: (q, workDir) => api('GET', `/api/web/search?q=${encodeURIComponent(q)}${workDir ? `&work_dir=${encodeURIComponent(workDir)}` : ''}`),
};

export const web = {
  workDirs: () => api('GET', '/api/web/work-dirs'),
  config: () => api('GET', '/api/web/config'),
  saveConfig: text => api('PUT', '/api/web/config', {text}),
  blob: id => api('GET', `/api/blobs/${id}`),
};

// Wire over WebSocket with the server's extensions: every event carries `seq`; the connection
// attaches from the last `seq` it saw, so a dropped network or a restarted socket continues
// exactly where it stopped (events below that number are dropped as duplicates). When the
// server cannot fill the gap (`complete: false`) the owner reloads the transcript.

import {observerToken} from './api.js';

export class WireConnection {
  constructor(sessionId, {onMessage, onState, onGap}) {
    this.sessionId = sessionId;
    this.onMessage = onMessage;
    this.onState = onState || (() => {});
    this.onGap = onGap || (() => {});
    this.lastSeq = null;   // null: nothing seen yet (first attach sends the whole live ring)
    this.epoch = null;
    this.mode = 'controller';
    this.wantControl = true;
    this.pending = new Map();
    this.counter = 0;
    this.closed = false;
    this.retry = 0;
    this.ws = null;
  }

  url() {
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    return `${scheme}://${location.host}/ws/sessions/${encodeURIComponent(this.sessionId)}`;
  }

  /** Open (or re-open) the socket, attaching as it opens (`?since_seq=…&mode=…`): resolves
   * with the attach result (the `attached` notification). */
  connect() {
    const observer = observerToken();
    const protocols = ['soulwire'];
    if (observer && observer.sessionId === this.sessionId) {
      protocols.push(`soulwire.token.${observer.token}`);
      this.wantControl = false;
    }
    const control = this.wantControl && !this.observeOnly;
    const query = new URLSearchParams({since_seq: String(this.lastSeq ?? 0), mode: control ? 'controller' : 'observer'});
    if (control && sessionStorage.getItem(`soulwire.ctl.${this.sessionId}`) === '1') query.set('take', '1');
    if (this.epoch) query.set('epoch', this.epoch);
    this.onState(this.lastSeq === null ? 'connecting' : 'reconnecting');
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`${this.url()}?${query}`, protocols);
      this.ws = ws;
      let attached = false;
      this.attachWaiter = result => {
        attached = true;
        this.retry = 0;
        resolve(this.attached(result));
      };
      ws.onmessage = event => this.receive(event.data);
      ws.onclose = event => {
        for (const {reject: fail} of this.pending.values()) fail(new Error('connection closed'));
        this.pending.clear();
        if (this.ws !== ws || this.closed) return;
        if (!attached && event.code === 4409 && /controller/.test(event.reason)) {
          this.observeOnly = true;  // someone else controls it: watch instead
          this.connect().then(resolve, reject);
          return;
        }
        if (!attached && this.lastSeq === null) { reject(new Error(event.reason || `cannot connect (${event.code})`)); return; }
        this.onState('reconnecting');
        const delay = Math.min(5000, 200 * 2 ** this.retry++);
        setTimeout(() => { if (!this.closed && this.ws === ws) this.connect().then(resolve, () => {}); }, delay);
      };
    });
  }

  attached(result) {
    const gap = this.lastSeq !== null && !result.complete;
    this.epoch = result.epoch;
    this.observeOnly = false;
    this.setMode(result.mode);
    if (!result.complete) {
      // Nothing missed can be sent (first attach of a long-lived session, the gap left the ring,
      // or the server restarted): the owner reloads the history and continues live from here.
      this.lastSeq = Math.max(this.lastSeq ?? 0, result.last_seq);
    }
    this.onState('live');
    if (gap) this.onGap(result);
    return result;
  }

  setMode(mode) {
    this.mode = mode;
    sessionStorage.setItem(`soulwire.ctl.${this.sessionId}`, mode === 'controller' ? '1' : '0');
    this.onState('role', mode);
  }

  receive(text) {
    let message;
    try { message = JSON.parse(text); } catch { return; }
    if (message.method === undefined) {
      const waiter = this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id);
      if (message.error) {
        const err = new Error(message.error.message);
        err.code = message.error.code;
        err.data = message.error.data;
        waiter.reject(err);
      } else waiter.resolve(message.result);
      return;
    }
    if (message.method === 'attached') { this.attachWaiter?.(message.params); return; }
    const seq = message.params?.seq;
    if (typeof seq === 'number') {
      if (this.lastSeq !== null && seq <= this.lastSeq && !message.params?.resent) return;  // seen already
      if (this.lastSeq === null || seq > this.lastSeq) this.lastSeq = seq;
    }
    if (message.method === 'role/changed') {
      // A hand-over: an attach without parameters answers with this connection's role now.
      this.request('attach', {}).then(r => this.setMode(r.mode)).catch(() => {});
    }
    this.onMessage(message);
  }

  request(method, params) {
    const id = `w${++this.counter}`;
    const body = {jsonrpc: '2.0', id, method};
    if (params !== undefined) body.params = params;
    return new Promise((resolve, reject) => {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) { reject(new Error('not connected')); return; }
      this.pending.set(id, {resolve, reject});
      this.ws.send(JSON.stringify(body));
    });
  }

  respond(id, result) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({jsonrpc: '2.0', id, result}));
  }

  async takeControl() {
    this.wantControl = true;
    const result = await this.request('attach', {mode: 'controller', take: true});
    this.setMode(result.mode);
    return result;
  }

  close() {
    this.closed = true;
    this.ws?.close(1000);
  }
}

// @ts-check
// Wire over WebSocket with the server's extensions: every event carries `seq`; the connection
// attaches from the last `seq` it saw, so a dropped network or a restarted socket continues
// exactly where it stopped (events below that number are dropped as duplicates). When the
// server cannot fill the gap (`complete: false`) the owner reloads the transcript.
//
// On replicas sharing a store, a session another replica runs answers this page's WebSocket
// with a 307 there, which a browser's WebSocket does not follow (nor may this page connect to
// another origin: its Content-Security-Policy). The page then watches the session through its
// own replica (observers attach anywhere) and names the owner (`onOwner`). Taking control asks
// for the owner named in the answer to `attach` (`data.owner`) at this same origin first
// (`?owner=…`: HAProxy as `serve haproxy-config` ships it routes that to the owner, and the
// page's cookie goes along); where nothing routes it (the replica reached directly), the page
// goes to the owner's address.

import {observerToken, sessions} from './api.js';

/** @typedef {Record<string, any>} Json */
/** @typedef {{jsonrpc: '2.0', id?: string, method?: string, params?: Json, result?: any, error?: {code: number, message: string, data?: unknown}}} RpcMessage */
/** @typedef {{complete: boolean, epoch: string, mode: string, last_seq: number}} AttachResult  the `attached` notification */
/** @typedef {'connecting' | 'reconnecting' | 'live' | 'role'} ConnState */

/** Attempts to re-attach as controller after a drop before watching instead (their back-off
 * adds up to more than a replica's default lease, 10 s). */
const REATTACH_TRIES = 6;

/** A JSON-RPC error answer, with its code and data. */
export class RpcError extends Error {
  /** @param {{code: number, message: string, data?: unknown}} error */
  constructor(error) {
    super(error.message);
    this.code = error.code;
    this.data = error.data;
  }
}

export class WireConnection {
  /**
   * @param {string} sessionId
   * @param {{onMessage: (message: RpcMessage) => void, onState?: (state: ConnState, mode?: string) => void, onGap?: (result: AttachResult) => void, onOwner?: (owner: string) => void}} handlers
   */
  constructor(sessionId, {onMessage, onState, onGap, onOwner}) {
    this.sessionId = sessionId;
    this.onMessage = onMessage;
    this.onState = onState || (() => {});
    this.onGap = onGap || (() => {});
    this.onOwner = onOwner || (() => {});
    /** @type {number | null} null: nothing seen yet (first attach sends the whole live ring) */
    this.lastSeq = null;
    /** @type {string | null} */
    this.epoch = null;
    this.mode = 'controller';
    this.wantControl = true;
    this.observeOnly = false;
    /** @type {string | null} the replica asked for by name (`?owner=`), to take control there */
    this.via = null;
    /** @type {Map<string, {resolve: (result: any) => void, reject: (error: Error) => void}>} */
    this.pending = new Map();
    this.counter = 0;
    this.closed = false;
    this.retry = 0;
    /** @type {WebSocket | null} */
    this.ws = null;
    /** @type {((result: AttachResult) => void) | null} */
    this.attachWaiter = null;
  }

  url() {
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    return `${scheme}://${location.host}/ws/sessions/${encodeURIComponent(this.sessionId)}`;
  }

  /** Open (or re-open) the socket, attaching as it opens (`?since_seq=…&mode=…`): resolves
   * with the attach result (the `attached` notification).
   * @returns {Promise<AttachResult>} */
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
    if (this.via && control) { query.set('owner', this.via); query.set('take', '1'); }
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
        if (!attached && this.via) {  // nothing routed `?owner=` to the owner: go to its page
          this.goTo(this.via);
          return;
        }
        if (!attached && event.code === 4409 && /controller/.test(event.reason)) {
          this.observeOnly = true;  // someone else controls it: watch instead
          this.connect().then(resolve, reject);
          return;
        }
        const retry = () => {
          if (!attached && this.lastSeq === null) { reject(new Error(event.reason || `cannot connect (${event.code})`)); return; }
          this.onState('reconnecting');
          const delay = Math.min(5000, 200 * 2 ** this.retry++);
          setTimeout(() => { if (!this.closed && this.ws === ws) this.connect().then(resolve, () => {}); }, delay);
        };
        if (attached || !this.wantControl || this.observeOnly) { retry(); return; }
        // A controlling connection that dropped (its replica died, or handed the session over)
        // is refused at first while the dead owner's lease still names it: keep asking for
        // control for a while (the replica reached takes the session over once the lease is
        // gone), instead of settling to watch a session nobody runs any more.
        if (this.lastSeq !== null && this.mode === 'controller' && this.retry < REATTACH_TRIES) { retry(); return; }
        // Refused before the handshake: is the session run by another replica (a 307 there)?
        this.ownerElsewhere().then(owner => {
          if (this.closed || this.ws !== ws) return;
          if (!owner) { retry(); return; }
          this.observeOnly = true;  // watch it here; control is taken on the owner's page
          this.onOwner(owner);
          this.connect().then(resolve, reject);
        });
      };
    });
  }

  /** The address of another replica that runs the session, if one does. @returns {Promise<string | null>} */
  async ownerElsewhere() {
    try {
      const info = await sessions.get(this.sessionId);
      return info.held_elsewhere && typeof info.replica === 'string' ? info.replica : null;
    } catch {
      return null;
    }
  }

  /** @param {AttachResult} result */
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

  /** @param {string} mode */
  setMode(mode) {
    this.mode = mode;
    sessionStorage.setItem(`soulwire.ctl.${this.sessionId}`, mode === 'controller' ? '1' : '0');
    this.onState('role', mode);
  }

  /** @param {string} text */
  receive(text) {
    /** @type {RpcMessage} */
    let message;
    try { message = JSON.parse(text); } catch { return; }
    if (message.method === undefined) {
      const waiter = this.pending.get(message.id || '');
      if (!waiter) return;
      this.pending.delete(message.id || '');
      if (message.error) waiter.reject(new RpcError(message.error));
      else waiter.resolve(message.result);
      return;
    }
    if (message.method === 'attached') { this.attachWaiter?.(/** @type {AttachResult} */ (message.params)); return; }
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

  /** @param {string} method @param {Json} [params] @returns {Promise<any>} */
  request(method, params) {
    const id = `w${++this.counter}`;
    /** @type {RpcMessage} */
    const body = {jsonrpc: '2.0', id, method};
    if (params !== undefined) body.params = params;
    return new Promise((resolve, reject) => {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) { reject(new Error('not connected')); return; }
      this.pending.set(id, {resolve, reject});
      this.ws.send(JSON.stringify(body));
    });
  }

  /** @param {string} id @param {unknown} result */
  respond(id, result) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({jsonrpc: '2.0', id, result}));
  }

  async takeControl() {
    this.wantControl = true;
    let result;
    try {
      result = await this.request('attach', {mode: 'controller', take: true});
    } catch (err) {
      // This replica only watches a session another one runs: control is taken there.
      const owner = err instanceof RpcError ? /** @type {{owner?: unknown}} */ (err.data ?? {}).owner : null;
      if (typeof owner !== 'string' || !/^https?:\/\//.test(owner)) throw err;
      if (this.via === owner) { this.goTo(owner); return new Promise(() => {}); }
      this.via = owner;  // at this origin first (a load balancer routes it there)
      this.observeOnly = false;
      this.ws?.close(1000);
      return this.connect();
    }
    this.setMode(result.mode);
    return result;
  }

  /** Leave for the owner's own page (where the replica was reached directly). @param {string} owner */
  goTo(owner) {
    this.closed = true;
    location.assign(`${owner}/web/#/s/${encodeURIComponent(this.sessionId)}`);
  }

  close() {
    this.closed = true;
    this.ws?.close(1000);
  }
}

/* A Worker for pages opened from disk (file://), where the browser refuses to start workers.
 *
 * The site's search runs in a worker; opened from disk, its page could not start it, and the
 * search box stayed hidden. Here the worker's script runs in a hidden iframe of the page's own
 * origin instead, and messages pass by direct calls. Loaded by mkdocs.yml (extra.polyfills)
 * before the theme's scripts; over http(s) it does nothing. Written for meshcast's site, in the
 * manner of the iframe-worker package that Material's offline plugin otherwise loads from a CDN
 * (this machine, and many readers', has no network).
 */
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  class IFrameWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.onerror = null;
      this._pending = [];
      this._scope = null;
      const frame = document.createElement("iframe");
      frame.hidden = true;
      frame.srcdoc = "<!doctype html><title>worker</title>";
      frame.addEventListener("load", () => {
        const scope = frame.contentWindow;
        scope.postMessage = (data) => this._deliver(data); // the worker's postMessage: to this page
        const script = scope.document.createElement("script");
        script.src = new URL(url, document.baseURI).href;
        script.addEventListener("load", () => {
          this._scope = scope;
          for (const data of this._pending.splice(0)) this._send(data);
        });
        script.addEventListener("error", () => this._fail(`cannot load ${script.src}`));
        scope.document.head.appendChild(script);
      }, { once: true });
      this._frame = frame;
      const attach = () => document.body.appendChild(frame);
      if (document.body) attach();
      else document.addEventListener("DOMContentLoaded", attach, { once: true });
    }

    postMessage(data) {
      if (this._scope) this._send(data);
      else this._pending.push(data);
    }

    terminate() {
      this._frame.remove();
      this._scope = null;
    }

    _send(data) {
      const scope = this._scope;
      setTimeout(() => scope.dispatchEvent(new scope.MessageEvent("message", { data })), 0);
    }

    _deliver(data) {
      setTimeout(() => {
        const event = new MessageEvent("message", { data });
        if (this.onmessage) this.onmessage(event);
        this.dispatchEvent(event);
      }, 0);
    }

    _fail(message) {
      const event = new ErrorEvent("error", { message });
      if (this.onerror) this.onerror(event);
      this.dispatchEvent(event);
    }
  }

  window.Worker = IFrameWorker;
})();

// What the guest offers a program, written in the program's own language: the console shim and
// its inspector, lossless JSON snapshots, the namespace objects and injected error classes, and
// timers. It runs once, before the program, and captures every intrinsic it relies on so that a
// program that mutates or deletes globals cannot change validation, transport or rendering.
// It must never hold state the host relies on: the host re-validates everything it is sent.
(function (host) {
  'use strict';
  const ObjectProto = Object.prototype;
  const ArrayProto = Array.prototype;
  const ErrorProto = Error.prototype;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const SyntaxErrorCtor = SyntaxError;
  const RangeErrorCtor = RangeError;
  const PromiseCtor = Promise;
  const MapCtor = Map;
  const SetCtor = Set;
  const WeakMapCtor = WeakMap;
  const StringCtor = String;
  const apply = Reflect.apply;
  const ownKeys = Reflect.ownKeys;
  const getOwn = Reflect.getOwnPropertyDescriptor;
  const getProto = Reflect.getPrototypeOf;
  const defineProperty = Reflect.defineProperty;
  const isArray = Array.isArray;
  const freeze = Object.freeze;
  const create = Object.create;
  const objectIs = Object.is;
  const quoteString = JSON.stringify;
  const arrayJoin = ArrayProto.join;
  const stringSlice = String.prototype.slice;
  const stringIndexOf = String.prototype.indexOf;
  const stringReplace = String.prototype.replace;
  const stringRepeat = String.prototype.repeat;
  const regexExec = RegExp.prototype.exec;
  const mapGet = MapCtor.prototype.get;
  const mapSet = MapCtor.prototype.set;
  const mapDelete = MapCtor.prototype.delete;
  const mapHas = MapCtor.prototype.has;
  const mapForEach = MapCtor.prototype.forEach;
  const mapSize = getOwn(MapCtor.prototype, 'size').get;
  const setAdd = SetCtor.prototype.add;
  const setHas = SetCtor.prototype.has;
  const setDelete = SetCtor.prototype.delete;
  const setForEach = SetCtor.prototype.forEach;
  const setSize = getOwn(SetCtor.prototype, 'size').get;
  const weakMapGet = WeakMapCtor.prototype.get;
  const weakMapSet = WeakMapCtor.prototype.set;
  const promiseThen = PromiseCtor.prototype.then;
  const promiseResolve = PromiseCtor.resolve;
  const dateProto = Date.prototype;
  const dateToISOString = dateProto.toISOString;
  const dateGetTime = dateProto.getTime;
  const regexpProto = RegExp.prototype;
  const regexpToString = regexpProto.toString;
  const functionToString = Function.prototype.toString;
  const symbolToString = Symbol.prototype.toString;
  const bigintToString = BigInt.prototype.toString;
  const mapProto = MapCtor.prototype;
  const setProto = SetCtor.prototype;
  const promiseProto = PromiseCtor.prototype;
  const stackGetter = (getOwn(ErrorProto, 'stack') || {}).get;
  const hostLog = host.log;
  const hostTimerStart = host.timerStart;
  const hostTimerCancel = host.timerCancel;
  const hostDone = host.done;
  const PROGRAM_FRAME = /\(program:(\d+):(\d+)\)/;

  // Internal lists are null-prototype objects with a length counter, so that setters a program
  // plants on Array.prototype never see them.
  function list() {
    const l = create(null);
    l.n = 0;
    return l;
  }
  function push(l, v) {
    l[l.n] = v;
    l.n += 1;
  }
  function joinList(l, sep) {
    const parts = [];
    for (let i = 0; i < l.n; i += 1) {
      defineProperty(parts, i, { value: l[i], writable: true, enumerable: true, configurable: true });
    }
    return apply(arrayJoin, parts, [sep]);
  }

  // ---- Lossless JSON snapshots -------------------------------------------------------------
  // `host.snapshot(value)` (native: guest/src/snapshot.rs) writes the value as JSON into the
  // host-bound buffer and returns false when it is not lossless JSON.
  const snapshot = host.snapshot;

  // ---- Inspection for the console ------------------------------------------------------------
  // A compact rendering in the style of Node's util.inspect: depth 4, 100 array items, 10,000
  // string characters. Depth-bounded, so plain recursion is safe.
  const INSPECT_DEPTH = 4;
  const MAX_ARRAY = 100;
  const MAX_STRING = 10000;
  const BREAK_LENGTH = 80;
  const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
  const INDEX = /^(?:0|[1-9][0-9]*)$/;

  const ESCAPED_DOUBLE = /\\"/g;
  const SINGLE = /'/g;
  function singleQuoted(text) {
    const body = apply(stringSlice, quoteString(text), [1, -1]);
    return "'" + apply(stringReplace, apply(stringReplace, body, [ESCAPED_DOUBLE, '"']), [SINGLE, "\\'"]) + "'";
  }
  function quoteInspect(s) {
    let text = s;
    let suffix = '';
    if (text.length > MAX_STRING) {
      suffix = `... ${text.length - MAX_STRING} more character${text.length - MAX_STRING > 1 ? 's' : ''}`;
      text = apply(stringSlice, text, [0, MAX_STRING]);
    }
    const hasSingle = apply(stringIndexOf, text, ["'"]) !== -1;
    const hasDouble = apply(stringIndexOf, text, ['"']) !== -1;
    let quoted;
    if (!hasSingle) {
      quoted = singleQuoted(text);
    } else if (!hasDouble) {
      quoted = quoteString(text);
    } else {
      quoted = singleQuoted(text);
    }
    return quoted + suffix;
  }

  function keyText(k) {
    if (typeof k === 'symbol') return '[' + apply(symbolToString, k, []) + ']';
    return apply(regexExec, IDENT, [k]) !== null ? k : quoteInspect(k);
  }

  function functionText(f) {
    let source = '';
    try {
      source = apply(functionToString, f, []);
    } catch (_) {}
    let name = '';
    try {
      const d = getOwn(f, 'name');
      if (d && typeof d.value === 'string') name = d.value;
    } catch (_) {}
    if (apply(stringSlice, source, [0, 5]) === 'class') {
      return name ? `[class ${name}]` : '[class (anonymous)]';
    }
    const kind = apply(stringSlice, source, [0, 5]) === 'async' ? 'AsyncFunction' : 'Function';
    return name ? `[${kind}: ${name}]` : `[${kind} (anonymous)]`;
  }

  function errorText(e) {
    let name = 'Error';
    let message = '';
    try {
      name = StringCtor(e.name);
      message = StringCtor(e.message);
    } catch (_) {}
    return message ? `${name}: ${message}` : name;
  }

  function isError(v) {
    if (stackGetter === undefined) return false;
    let p = v;
    for (let i = 0; i < 10000 && p !== null; i += 1) {
      if (p === ErrorProto) return true;
      p = getProto(p);
    }
    return false;
  }

  function constructorName(v) {
    let p = getProto(v);
    while (p !== null) {
      const d = getOwn(p, 'constructor');
      if (d && typeof d.value === 'function') {
        const n = getOwn(d.value, 'name');
        if (n && typeof n.value === 'string' && n.value) return n.value;
      }
      p = getProto(p);
    }
    return null;
  }

  function reduce(entries, open, close, prefix, indent) {
    const base = prefix ? prefix + ' ' : '';
    if (entries.n === 0) return base + open + close;
    let total = entries.n + indent + base.length + open.length;
    let multiline = false;
    for (let i = 0; i < entries.n; i += 1) {
      total += entries[i].length;
      if (apply(stringIndexOf, entries[i], ['\n']) !== -1) multiline = true;
    }
    if (!multiline && total + entries.n <= BREAK_LENGTH) {
      return `${base}${open} ${joinList(entries, ', ')} ${close}`;
    }
    const pad = '\n' + apply(stringRepeat, ' ', [indent]);
    return `${base}${open}${pad}  ${joinList(entries, ',' + pad + '  ')}${pad}${close}`;
  }

  function inspect(v, depth, seen, indent) {
    switch (typeof v) {
      case 'string':
        return quoteInspect(v);
      case 'number':
        return objectIs(v, -0) ? '-0' : StringCtor(v);
      case 'bigint':
        return apply(bigintToString, v, []) + 'n';
      case 'boolean':
        return v ? 'true' : 'false';
      case 'undefined':
        return 'undefined';
      case 'symbol':
        return apply(symbolToString, v, []);
      case 'function':
        return functionText(v);
      default:
        break;
    }
    if (v === null) return 'null';
    if (apply(setHas, seen, [v])) return '[Circular]';
    try {
      if (isError(v)) return errorText(v);
      const proto = getProto(v);
      if (proto === dateProto) {
        const t = apply(dateGetTime, v, []);
        return t === t ? apply(dateToISOString, v, []) : 'Invalid Date';
      }
      if (proto === regexpProto) return apply(regexpToString, v, []);
      if (proto === promiseProto) return 'Promise { <pending> }';
      if (depth > INSPECT_DEPTH) {
        if (isArray(v)) return '[Array]';
        const n = constructorName(v);
        return n && n !== 'Object' ? `[${n}]` : '[Object]';
      }
      apply(setAdd, seen, [v]);
      const entries = list();
      let result;
      if (proto === mapProto) {
        apply(mapForEach, v, [(value, key) => {
          push(entries, `${inspect(key, depth + 1, seen, indent + 2)} => ${inspect(value, depth + 1, seen, indent + 2)}`);
        }]);
        result = reduce(entries, '{', '}', `Map(${apply(mapSize, v, [])})`, indent);
      } else if (proto === setProto) {
        apply(setForEach, v, [(value) => {
          push(entries, inspect(value, depth + 1, seen, indent + 2));
        }]);
        result = reduce(entries, '{', '}', `Set(${apply(setSize, v, [])})`, indent);
      } else if (isArray(v)) {
        const length = v.length;
        let holes = 0;
        const shown = length < MAX_ARRAY ? length : MAX_ARRAY;
        for (let i = 0; i < shown; i += 1) {
          if (getOwn(v, StringCtor(i)) === undefined) {
            holes += 1;
            continue;
          }
          if (holes > 0) {
            push(entries, `<${holes} empty item${holes > 1 ? 's' : ''}>`);
            holes = 0;
          }
          push(entries, inspect(v[i], depth + 1, seen, indent + 2));
        }
        if (holes > 0) push(entries, `<${holes} empty item${holes > 1 ? 's' : ''}>`);
        if (length > MAX_ARRAY) {
          const more = length - MAX_ARRAY;
          push(entries, `... ${more} more item${more > 1 ? 's' : ''}`);
        }
        const keys = ownKeys(v);
        for (let i = 0; i < keys.length; i += 1) {
          const k = keys[i];
          if (k === 'length' || (typeof k === 'string' && apply(regexExec, INDEX, [k]) !== null)) continue;
          const d = getOwn(v, k);
          if (!d || !d.enumerable) continue;
          push(entries, `${keyText(k)}: ${'value' in d ? inspect(d.value, depth + 1, seen, indent + 2) : '[Getter]'}`);
        }
        result = reduce(entries, '[', ']', '', indent);
      } else {
        const keys = ownKeys(v);
        for (let i = 0; i < keys.length; i += 1) {
          const k = keys[i];
          const d = getOwn(v, k);
          if (!d || !d.enumerable) continue;
          const shownValue = 'value' in d ? inspect(d.value, depth + 1, seen, indent + 2) : d.set ? '[Getter/Setter]' : '[Getter]';
          push(entries, `${keyText(k)}: ${shownValue}`);
        }
        let prefix = '';
        if (proto === null) prefix = '[Object: null prototype]';
        else if (proto !== ObjectProto) {
          const n = constructorName(v);
          prefix = n === null ? '' : n === 'Object' ? '' : n;
        }
        result = reduce(entries, '{', '}', prefix, indent);
      }
      apply(setDelete, seen, [v]);
      return result;
    } catch (_) {
      return '[object]';
    }
  }

  function formatArgs(args) {
    const parts = list();
    for (let i = 0; i < args.length; i += 1) {
      const a = args[i];
      push(parts, typeof a === 'string' ? a : inspect(a, 1, new SetCtor(), 0));
    }
    return joinList(parts, ' ');
  }

  const consoleShim = create(null);
  const methods = ['log', 'info', 'warn', 'error', 'debug'];
  for (let i = 0; i < methods.length; i += 1) {
    defineProperty(consoleShim, methods[i], {
      value: function (...args) {
        hostLog(formatArgs(args));
      },
      enumerable: true,
    });
  }
  freeze(consoleShim);

  // ---- Thrown values ---------------------------------------------------------------------------
  // A binding's rejection is made when its reply comes, far from the program: it is placed at
  // the call instead, which the binding noted when the call was made.
  const callSites = new WeakMapCtor();

  function position(e) {
    const site = apply(weakMapGet, callSites, [e]);
    if (site !== undefined) return site;
    if (stackGetter === undefined) return [0, 0];
    try {
      const stack = apply(stackGetter, e, []);
      if (typeof stack !== 'string') return [0, 0];
      const m = apply(regexExec, PROGRAM_FRAME, [stack]);
      if (m === null) return [0, 0];
      return [+m[1], +m[2]];
    } catch (_) {
      return [0, 0];
    }
  }

  function renderThrown(e) {
    try {
      if (typeof e === 'object' && e !== null && isError(e)) {
        const where = position(e);
        return [errorText(e), where[0], where[1]];
      }
      return [StringCtor(e), 0, 0];
    } catch (_) {
      return ['program threw an unrenderable value', 0, 0];
    }
  }

  // ---- Bindings ---------------------------------------------------------------------------------

  function makeErrorClass(name, member) {
    const C = class extends ErrorCtor {
      constructor(message) {
        super(message);
      }
    };
    defineProperty(C, 'name', { value: name });
    defineProperty(C.prototype, 'name', { value: name, writable: true, configurable: true });
    return { ctor: C, member };
  }

  function bindingError(errorClass, memberName, message, line, column) {
    let e;
    if (errorClass === undefined) {
      e = new ErrorCtor(message);
    } else {
      e = new errorClass.ctor(message);
      defineProperty(e, errorClass.member, {
        value: memberName,
        writable: true,
        enumerable: true,
        configurable: true,
      });
    }
    if (line > 0) apply(weakMapSet, callSites, [e, [line, column]]);
    return e;
  }

  // ---- Timers -------------------------------------------------------------------------------------
  const timers = new MapCtor();
  let nextTimerId = 0;
  function setTimeoutShim(callback, delay, ...args) {
    if (typeof callback !== 'function') {
      throw new TypeErrorCtor('The "callback" argument must be of type function');
    }
    let ms = +delay;
    if (!(ms >= 1 && ms <= 2147483647)) ms = 1;
    nextTimerId += 1;
    const id = nextTimerId;
    if (!hostTimerStart(id, ms)) {
      throw new RangeErrorCtor('too many timers are armed; clear some before setting more');
    }
    apply(mapSet, timers, [id, { callback, args }]);
    return id;
  }
  function clearTimeoutShim(id) {
    if (apply(mapHas, timers, [id])) {
      apply(mapDelete, timers, [id]);
      hostTimerCancel(id);
    }
  }
  function fireTimer(id) {
    const t = apply(mapGet, timers, [id]);
    if (t === undefined) return;
    apply(mapDelete, timers, [id]);
    apply(t.callback, undefined, t.args);
  }
  function queueMicrotaskShim(callback) {
    if (typeof callback !== 'function') {
      throw new TypeErrorCtor('The "callback" argument must be of type function');
    }
    apply(promiseThen, apply(promiseResolve, PromiseCtor, []), [() => callback()]);
  }
  const globalNames = { setTimeout: setTimeoutShim, clearTimeout: clearTimeoutShim, queueMicrotask: queueMicrotaskShim };
  const globalKeys = ['setTimeout', 'clearTimeout', 'queueMicrotask'];
  for (let i = 0; i < globalKeys.length; i += 1) {
    defineProperty(globalThis, globalKeys[i], {
      value: globalNames[globalKeys[i]],
      writable: true,
      configurable: true,
    });
  }

  // ---- fetch ---------------------------------------------------------------------------------
  // The Web's `fetch(url, init?)` over the host's fetch tool, installed only when the host has
  // one: the request becomes the tool's arguments, its result a `Response`. Everything the
  // request may do is the tool's to decide (hosts, redirects, caps); this only changes shape.
  const jsonParse = JSON.parse;
  const stringToLowerCase = String.prototype.toLowerCase;
  const stringCharCodeAt = String.prototype.charCodeAt;
  const fromCharCode = String.fromCharCode;
  const Uint8ArrayCtor = Uint8Array;
  const symbolIterator = Symbol.iterator;
  const mapEntries = MapCtor.prototype.entries;

  function headerName(name) {
    return apply(stringToLowerCase, StringCtor(name), []);
  }

  class Headers {
    #map = new MapCtor();
    constructor(init) {
      if (init === undefined || init === null) return;
      if (init instanceof Headers) {
        init.forEach((value, name) => this.append(name, value));
      } else if (typeof init[symbolIterator] === 'function') {
        for (const pair of init) {
          if (pair === null || typeof pair !== 'object' || pair.length !== 2) {
            throw new TypeErrorCtor('Headers: each entry must be a [name, value] pair');
          }
          this.append(pair[0], pair[1]);
        }
      } else if (typeof init === 'object') {
        const keys = ownKeys(init);
        for (let i = 0; i < keys.length; i += 1) {
          const d = getOwn(init, keys[i]);
          if (d && d.enumerable && typeof keys[i] === 'string') this.append(keys[i], init[keys[i]]);
        }
      } else {
        throw new TypeErrorCtor('Headers: expected an object, an array of pairs or Headers');
      }
    }
    get(name) {
      const value = apply(mapGet, this.#map, [headerName(name)]);
      return value === undefined ? null : value;
    }
    has(name) {
      return apply(mapHas, this.#map, [headerName(name)]);
    }
    set(name, value) {
      apply(mapSet, this.#map, [headerName(name), StringCtor(value)]);
    }
    append(name, value) {
      const key = headerName(name);
      const old = apply(mapGet, this.#map, [key]);
      apply(mapSet, this.#map, [key, old === undefined ? StringCtor(value) : old + ', ' + StringCtor(value)]);
    }
    delete(name) {
      apply(mapDelete, this.#map, [headerName(name)]);
    }
    forEach(callback, thisArg) {
      apply(mapForEach, this.#map, [(value, key) => apply(callback, thisArg, [value, key, this])]);
    }
    entries() {
      return apply(mapEntries, this.#map, []);
    }
    *keys() {
      for (const [key] of this.entries()) yield key;
    }
    *values() {
      for (const [, value] of this.entries()) yield value;
    }
    [symbolIterator]() {
      return this.entries();
    }
  }

  const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  function base64Bytes(text) {
    const codes = create(null);
    for (let i = 0; i < 64; i += 1) codes[apply(stringCharCodeAt, BASE64, [i])] = i;
    let end = text.length;
    while (end > 0 && apply(stringCharCodeAt, text, [end - 1]) === 61) end -= 1;
    const out = new Uint8ArrayCtor((end * 3) >> 2);
    let bits = 0;
    let count = 0;
    let at = 0;
    for (let i = 0; i < end; i += 1) {
      bits = (bits << 6) | codes[apply(stringCharCodeAt, text, [i])];
      count += 6;
      if (count >= 8) {
        count -= 8;
        out[at] = (bits >> count) & 255;
        at += 1;
      }
    }
    return out;
  }

  // UTF-8 as the Web's TextDecoder reads it: each malformed sequence becomes U+FFFD.
  function utf8Text(bytes) {
    const parts = list();
    let chunk = '';
    let i = 0;
    while (i < bytes.length) {
      const b = bytes[i];
      let code = 0xfffd;
      let size = 1;
      if (b < 0x80) {
        code = b;
      } else {
        const need = b >= 0xf0 && b <= 0xf4 ? 3 : b >= 0xe0 ? (b <= 0xef ? 2 : 0) : b >= 0xc2 ? 1 : 0;
        if (need > 0) {
          let value = b & (0x3f >> need);
          let ok = true;
          for (let k = 1; k <= need; k += 1) {
            const c = bytes[i + k];
            if (c === undefined || (c & 0xc0) !== 0x80) {
              ok = false;
              break;
            }
            value = (value << 6) | (c & 0x3f);
          }
          const min = need === 1 ? 0x80 : need === 2 ? 0x800 : 0x10000;
          if (ok && value >= min && value <= 0x10ffff && !(value >= 0xd800 && value <= 0xdfff)) {
            code = value;
            size = need + 1;
          }
        }
      }
      if (code > 0xffff) {
        code -= 0x10000;
        chunk += fromCharCode(0xd800 + (code >> 10), 0xdc00 + (code & 0x3ff));
      } else {
        chunk += fromCharCode(code);
      }
      if (chunk.length > 8192) {
        push(parts, chunk);
        chunk = '';
      }
      i += size;
    }
    push(parts, chunk);
    return joinList(parts, '');
  }

  class Response {
    #body;
    #base64;
    #used = false;
    constructor(result) {
      this.url = StringCtor(result.url);
      this.status = +result.status;
      this.statusText = StringCtor(result.statusText);
      this.ok = this.status >= 200 && this.status <= 299;
      this.redirected = result.redirected === true;
      this.truncated = result.truncated === true;
      this.type = 'basic';
      this.headers = new Headers(result.headers);
      this.#body = StringCtor(result.body);
      this.#base64 = result.encoding === 'base64';
    }
    get bodyUsed() {
      return this.#used;
    }
    #take() {
      if (this.#used) throw new TypeErrorCtor('Body has already been consumed.');
      this.#used = true;
    }
    async text() {
      this.#take();
      return this.#base64 ? utf8Text(base64Bytes(this.#body)) : this.#body;
    }
    async json() {
      return jsonParse(await this.text());
    }
    async bytes() {
      this.#take();
      if (this.#base64) return base64Bytes(this.#body);
      const text = this.#body;
      const out = [];
      for (let i = 0; i < text.length; i += 1) {
        let c = apply(stringCharCodeAt, text, [i]);
        if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
          const d = apply(stringCharCodeAt, text, [i + 1]);
          if (d >= 0xdc00 && d <= 0xdfff) {
            c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
            i += 1;
          }
        }
        if (c < 0x80) out[out.length] = c;
        else if (c < 0x800) { out[out.length] = 0xc0 | (c >> 6); out[out.length] = 0x80 | (c & 63); }
        else if (c < 0x10000) { out[out.length] = 0xe0 | (c >> 12); out[out.length] = 0x80 | ((c >> 6) & 63); out[out.length] = 0x80 | (c & 63); }
        else { out[out.length] = 0xf0 | (c >> 18); out[out.length] = 0x80 | ((c >> 12) & 63); out[out.length] = 0x80 | ((c >> 6) & 63); out[out.length] = 0x80 | (c & 63); }
      }
      return new Uint8ArrayCtor(out);
    }
    async arrayBuffer() {
      return (await this.bytes()).buffer;
    }
  }

  function installFetch(call) {
    async function fetch(input, init) {
      const args = create(null);
      args.url = typeof input === 'object' && input !== null && typeof input.url === 'string' ? input.url : StringCtor(input);
      if (init !== undefined && init !== null) {
        if (init.method !== undefined) args.method = StringCtor(init.method);
        if (init.headers !== undefined) {
          const headers = {};
          new Headers(init.headers).forEach((value, name) => {
            headers[name] = value;
          });
          args.headers = headers;
        }
        if (init.body !== undefined && init.body !== null) {
          if (typeof init.body !== 'string') {
            throw new TypeErrorCtor('fetch: the body must be a string; JSON.stringify an object first');
          }
          args.body = init.body;
        }
      }
      return new Response(await call({ ...args }));
    }
    const names = { fetch, Headers, Response };
    const keys = ['fetch', 'Headers', 'Response'];
    for (let i = 0; i < keys.length; i += 1) {
      defineProperty(globalThis, keys[i], { value: names[keys[i]], writable: true, configurable: true });
    }
  }

  // ---- Program lifecycle ----------------------------------------------------------------------------
  // The namespaces, error classes and `console` are installed natively (guest/src/lib.rs,
  // `install`) with `makeErrorClass` and `bindingError` from above.
  function complete(value) {
    if (value === undefined) {
      hostDone(0, '', 0, 0);
      return;
    }
    if (snapshot(value)) hostDone(1, '', 0, 0);
    else hostDone(3, 'program completion must be lossless JSON', 0, 0);
  }

  function fail(error) {
    const r = renderThrown(error);
    hostDone(2, r[0], r[1], r[2]);
  }

  // `expectedLength` is the length of the wrapper function's source text: a program that closes
  // the function it is wrapped in leaves a different function as the script's value.
  function start(main, values, expectedLength) {
    let source = '';
    try {
      source = apply(functionToString, main, []);
    } catch (_) {}
    if (typeof main !== 'function' || source.length !== expectedLength) {
      fail(new SyntaxErrorCtor('the program must be the body of one function; it closes the function it is wrapped in'));
      return;
    }
    let promise;
    try {
      promise = apply(main, undefined, values);
    } catch (e) {
      fail(e);
      return;
    }
    apply(promiseThen, promise, [complete, fail]);
  }

  return freeze({ start, fireTimer, fail, makeErrorClass, bindingError, installFetch, console: consoleShim });
});

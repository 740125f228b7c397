/*
 * A small JSON Schema (draft-07) checker for the dashboard's editors (loaded before dashboard.js):
 * the keywords this queue's request schemas use (shared/api/schemas.ts), so a definition is checked
 * against the very schema the service serves before it is sent. Keywords it does not know are
 * ignored: the service still validates with Ajv and its answer is shown as well.
 */
/* exported schemaErrors, isSlugid, newSlugid */
'use strict';
/** RFC 3339 with a time zone, as ajv-formats' `date-time` reads it. */
var DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
/** Taskcluster's slugid (a v4 UUID, url-safe base64 without padding): shared/tasks/vocabulary.ts. */
var SLUGID_RE = /^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$/;
/** Errors listed at most: the first few say what is wrong. */
var MAX_SCHEMA_ERRORS = 20;

function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

function hasType(v, t) {
  if (t === 'integer') return typeof v === 'number' && Number.isInteger(v);
  return typeOf(v) === t;
}

/** The places where `value` breaks `schema`, as "<path>: <what>" strings (empty: it conforms). */
function schemaErrors(schema, value) {
  var out = [];
  check(schema, value, '', out);
  return out.slice(0, MAX_SCHEMA_ERRORS);
}

function check(s, v, path, out) {
  if (!s || typeof s !== 'object') return;
  var at = path || '(root)';
  if (s.type) {
    var types = Array.isArray(s.type) ? s.type : [s.type];
    if (
      !types.some(function (t) {
        return hasType(v, t);
      })
    ) {
      out.push(at + ': must be ' + types.join(' or ') + ', is ' + typeOf(v));
      return;
    }
  }
  if (s.enum && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v))) out.push(at + ': must be one of ' + s.enum.join(', '));
  if (typeof v === 'string') {
    if (s.minLength !== undefined && v.length < s.minLength) out.push(at + ': shorter than ' + s.minLength);
    if (s.maxLength !== undefined && v.length > s.maxLength) out.push(at + ': longer than ' + s.maxLength);
    if (s.pattern && !new RegExp(s.pattern, 'u').test(v)) out.push(at + ': does not match ' + s.pattern);
    if (s.format === 'date-time' && (!DATE_TIME.test(v) || Number.isNaN(Date.parse(v)))) out.push(at + ': not an RFC 3339 date-time');
  }
  if (typeof v === 'number') {
    if (s.minimum !== undefined && v < s.minimum) out.push(at + ': less than ' + s.minimum);
    if (s.maximum !== undefined && v > s.maximum) out.push(at + ': more than ' + s.maximum);
  }
  if (Array.isArray(v)) {
    if (s.maxItems !== undefined && v.length > s.maxItems) out.push(at + ': more than ' + s.maxItems + ' items');
    if (s.minItems !== undefined && v.length < s.minItems) out.push(at + ': fewer than ' + s.minItems + ' items');
    if (s.uniqueItems) {
      var seen = {};
      v.forEach(function (x, i) {
        var k = JSON.stringify(x);
        if (seen[k]) out.push(at + '/' + i + ': repeats an earlier item');
        seen[k] = true;
      });
    }
    if (s.items && !Array.isArray(s.items))
      v.forEach(function (x, i) {
        check(s.items, x, path + '/' + i, out);
      });
  }
  if (typeOf(v) === 'object') {
    (s.required || []).forEach(function (k) {
      if (!Object.prototype.hasOwnProperty.call(v, k)) out.push(at + ': missing ' + k);
    });
    var props = s.properties || {};
    Object.keys(v).forEach(function (k) {
      if (Object.prototype.hasOwnProperty.call(props, k)) check(props[k], v[k], path + '/' + k, out);
      else if (s.additionalProperties === false) out.push(at + ': unknown property ' + k);
      else if (s.additionalProperties && typeof s.additionalProperties === 'object') check(s.additionalProperties, v[k], path + '/' + k, out);
    });
  }
}

function isSlugid(s) {
  return SLUGID_RE.test(s);
}

/** A new "nice" slugid, as taskcluster-client's slugid.nice(): a v4 UUID whose first bit is 0. */
function newSlugid() {
  var b = new Uint8Array(16);
  crypto.getRandomValues(b);
  b[0] &= 0x7f; // nice: never starts with '-'
  b[6] = (b[6] & 0x0f) | 0x40; // version 4
  b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
  var s = '';
  for (var i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

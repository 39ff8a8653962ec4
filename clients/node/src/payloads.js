// Payloads as bytes with a content type: which types are JSON, and the bytes an Accept sends.
//
// inboxd stores every payload byte for byte with its media type. A JSON type (application/json, or
// any +json suffix, parameters such as charset ignored) was validated as JSON by the server, so it
// parses; any other type (a form, XML, text, binary) is bytes the handler reads as they came.

/** What an Accept without a content type stores, and what an event from a server older than ClaimedEvent.contentType was. */
export const DEFAULT_CONTENT_TYPE = 'application/json';

// A media type's characters (RFC 9110's token, and the slash): the server's rule, which decided
// whether it validated the payload as JSON (inboxd.domain.validation.is_json_type).
const MEDIA_TYPE = /^[A-Za-z0-9!#$&^_.+/-]+$/;

/** True for application/json and any type/subtype+json, parameters and case aside; '' or none means the default, JSON. */
export function isJsonType(contentType) {
  let media = String(contentType || DEFAULT_CONTENT_TYPE).split(';', 1)[0].replace(/^[ \t]+|[ \t]+$/g, '');
  if (!MEDIA_TYPE.test(media)) return false;
  media = media.toLowerCase();
  return media === DEFAULT_CONTENT_TYPE || (media.endsWith('+json') && media.slice(0, -5).includes('/'));
}

/**
 * json() (or payload) was asked of a payload whose content type is not JSON: read job.body instead.
 * `permanent`, so a handler that lets it escape dead-letters its event at once: the same bytes
 * under the same type cannot parse on a retry.
 */
export class NotJsonPayload extends Error {
  constructor(contentType) {
    super(
      `the payload's content type is '${contentType}', not JSON (application/json or +json): ` +
        'read its bytes (job.body) instead of job.json() or job.payload',
    );
    this.name = 'NotJsonPayload';
    this.contentType = contentType;
    this.permanent = true;
  }
}

/** The payload's bytes parsed as JSON; throws NotJsonPayload, naming the type, unless the type is JSON. */
export function parseJson(body, contentType) {
  if (!isJsonType(contentType)) throw new NotJsonPayload(contentType);
  return JSON.parse(body.toString('utf8'));
}

/**
 * Payload bytes for an Accept: Buffers, Uint8Arrays and strings pass as their bytes (a string as
 * UTF-8); under a JSON type (the default) anything else is sent as JSON. Under another type only
 * bytes or a string will do: there is no single way to write an object as a form or as XML.
 */
export function payloadBytes(payload, contentType = '') {
  if (Buffer.isBuffer(payload)) return payload;
  if (payload instanceof Uint8Array) return Buffer.from(payload);
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8');
  if (!isJsonType(contentType)) {
    throw new TypeError(
      `a payload of content type '${contentType}' must be a Buffer, Uint8Array or string, not ${typeof payload}: ` +
        'only a JSON type writes other values (as JSON)',
    );
  }
  return Buffer.from(JSON.stringify(payload), 'utf8');
}

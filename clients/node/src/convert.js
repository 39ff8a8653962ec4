// Small conversions between JavaScript values and inboxd's protobuf shapes.

/** A google.protobuf.Duration from milliseconds. */
export function duration(ms) {
  if (!Number.isFinite(ms) || ms < 0) {
    throw new RangeError(`a duration must be a non-negative number of milliseconds, not ${ms}`);
  }
  const whole = Math.floor(ms);
  return { seconds: String(Math.floor(whole / 1000)), nanos: (whole % 1000) * 1e6 };
}

/** A google.protobuf.Timestamp from a Date. */
export function timestamp(date) {
  const ms = date.getTime();
  return { seconds: String(Math.floor(ms / 1000)), nanos: (((ms % 1000) + 1000) % 1000) * 1e6 };
}

/** A Date from a google.protobuf.Timestamp as @grpc/proto-loader delivers it (seconds as a string). */
export function toDate(ts) {
  if (!ts) return null;
  return new Date(Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1e6));
}

/** Enum values may be given without their prefix: 'INTENDED' for 'ACTION_STATE_INTENDED'. */
export function enumValue(prefix, value) {
  if (value === undefined || value === null) return undefined;
  const text = String(value).toUpperCase();
  return text.startsWith(prefix) ? text : `${prefix}${text}`;
}

/** Compares two int64 values given as decimal strings. */
export function compareInt64(a, b) {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

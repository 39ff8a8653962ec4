// Loads inboxd's contract from protos/ at run time, so the package carries no
// generated code that could drift from protos/.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const PACKAGE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * protos/ as `npm pack` bundles it inside the package, else where it sits when this
 * package lives at clients/node of the inboxd repository (the working tree has no copy).
 */
export const DEFAULT_PROTOS_DIR = fs.existsSync(path.join(PACKAGE_DIR, 'protos', 'inboxd'))
  ? path.join(PACKAGE_DIR, 'protos')
  : path.resolve(PACKAGE_DIR, '..', '..', 'protos');

const LOADER_OPTIONS = {
  // int64 values (fencing tokens, revisions, seconds) as decimal strings: a
  // JavaScript number would silently lose precision past 2^53.
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

const cache = new Map();

/**
 * The `inboxd.v1` package definition for @grpc/grpc-js.
 * @param {string} [protosDir] protos/ root; defaults to INBOXD_PROTOS, then the repository's protos/.
 */
export function loadInboxd(protosDir = process.env.INBOXD_PROTOS || DEFAULT_PROTOS_DIR) {
  if (!cache.has(protosDir)) {
    const definition = protoLoader.loadSync(['inboxd/v1/inbox.proto', 'inboxd/v1/admin.proto'], {
      ...LOADER_OPTIONS,
      includeDirs: [protosDir],
    });
    cache.set(protosDir, grpc.loadPackageDefinition(definition).inboxd.v1);
  }
  return cache.get(protosDir);
}

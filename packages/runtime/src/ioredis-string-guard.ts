/**
 * Loaded before ioredis (redis-routing-table.ts imports it first): keeps ioredis from slowing every
 * string scan of the process.
 *
 * ioredis 6 defines `class VerbatimString extends String` (resp/verbatim-string.js, for RESP3
 * verbatim-string replies) when it loads. A class whose prototype inherits from String.prototype
 * invalidates V8's StringWrapperToPrimitive protector for the life of the process, and with it
 * optimized code's fast `charCodeAt`: a loop over a string's characters ran 5x slower (12k
 * characters, Node 26: 15 -> 73 us). Every router and every cluster worker loads ioredis, and scans
 * strings on every request: the JSON reader, UTF-8 writers, tokenizers, chat templates.
 *
 * So the module is put in Node's require cache first with the same class not derived from String:
 * the same constructor (format, value), `format`, and the string from `toString` / `valueOf` /
 * string conversion. Only RESP3 verbatim-string replies make one; the routing table speaks RESP2
 * and never gets one. If ioredis moves or renames the file, nothing is replaced and ioredis loads its
 * own (correct, only slower); `ioredis-string-guard.test.ts` checks the protector stays intact.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** ioredis's VerbatimString (a RESP3 verbatim string and its format), without `extends String`. */
export class VerbatimString {
  constructor(
    readonly format: string,
    private readonly value: string,
  ) {}
  toString(): string {
    return this.value;
  }
  valueOf(): string {
    return this.value;
  }
  [Symbol.toPrimitive](): string {
    return this.value;
  }
  get length(): number {
    return this.value.length;
  }
}

const require = createRequire(import.meta.url);

/** The path of ioredis's resp/verbatim-string.js, where this version keeps it, or undefined. */
function verbatimStringFile(): string | undefined {
  try {
    const file = join(dirname(require.resolve('ioredis')), 'resp', 'verbatim-string.js');
    return existsSync(file) ? file : undefined;
  } catch {
    return undefined;
  }
}

const file = verbatimStringFile();
if (file !== undefined && require.cache[file] === undefined) {
  require.cache[file] = { id: file, filename: file, path: dirname(file), loaded: true, exports: { VerbatimString }, children: [], paths: [] } as unknown as NodeJS.Module;
}

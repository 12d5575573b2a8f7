/**
 * A command line as a table of flags: each flag names the options field it sets, its kind and its
 * help line. `parseFlags` is the one loop that turns argv into that options object; anything
 * malformed is a `UsageError` (the apps print it with their help text and exit 2).
 *
 * Accepted forms, as tritonserver accepts them: `--flag=value`, `--flag value`, and for booleans a
 * bare `--flag` (true) or `--flag true|false` (also 1/0, yes/no, on/off). `--help` and `-h` set
 * `help`. Anything else (a positional argument, an unknown flag, a missing value) is a UsageError.
 */

/** Bad command-line usage: the message says what is wrong; the app exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/**
 * - `string`: the value as given; `strings`: appended on every occurrence (repeatable); both
 *   checked against `pattern` when set;
 * - `int`: a safe integer >= `min` (default 0) and <= `max` when set (`intBool`: also `true` = 1,
 *   `false` = 0, as tritonserver reads `--log-verbose`);
 * - `number`: a finite decimal (`1`, `0.5`, `1e-3`) >= `min` and <= `max` when set;
 * - `bool`: see above; `enum`: one of `values` (`ignoreCase`: in any case, stored as listed).
 */
export type FlagKind = 'string' | 'strings' | 'int' | 'number' | 'bool' | 'enum';

export interface FlagSpec<K extends string = string> {
  readonly kind: FlagKind;
  /**
   * The options field the flag sets. A `strings` flag's field must start as an array. Absent only
   * for an `inert` flag, whose value is checked and dropped.
   */
  readonly key?: K;
  readonly help: string;
  /** `enum` only: the accepted values. */
  readonly values?: readonly string[];
  /** `enum` only: accept the values in any letter case (tritonserver lower-cases some flags). */
  readonly ignoreCase?: boolean;
  /** `int` only: also accept `true` (1) and `false` (0). */
  readonly intBool?: boolean;
  readonly min?: number;
  readonly max?: number;
  /** `string` / `strings` only: the whole value must match; `format` says how in the error and help. */
  readonly pattern?: RegExp;
  readonly format?: string;
  /**
   * Accepted for tritonserver's command lines, with no effect here: the value is validated like any
   * other, then dropped; the text says why (the app logs it when the flag is given).
   */
  readonly inert?: string;
}

/** Flag name (without `--`) → spec. Object order is the order `flagHelpLines` prints. */
export type FlagTable<T> = { readonly [flag: string]: FlagSpec<Extract<keyof T, string>> };

/**
 * A titled group of flags, as tritonserver's `--help` groups them ("Server", "Logging", "HTTP",
 * ...). An app's flag table is its groups merged (`mergeFlagGroups`); adding a feature's flags is
 * adding a group.
 */
export interface FlagGroup<T> {
  readonly title: string;
  readonly flags: FlagTable<T>;
}

/** One table of every group's flags; a flag named in two groups is a bug. */
export function mergeFlagGroups<T>(groups: ReadonlyArray<FlagGroup<T>>): FlagTable<T> {
  const all: Record<string, FlagSpec<Extract<keyof T, string>>> = {};
  for (const group of groups) {
    for (const [name, spec] of Object.entries(group.flags)) {
      if (Object.hasOwn(all, name)) throw new Error(`flag '--${name}' is in two groups`);
      if (spec.key === undefined && spec.inert === undefined) throw new Error(`flag '--${name}' sets no option and is not inert`);
      all[name] = spec;
    }
  }
  return all;
}

const BOOL_TRUE = new Set(['true', '1', 'yes', 'on']);
const BOOL_FALSE = new Set(['false', '0', 'no', 'off']);
const NUMBER = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

/**
 * Parse `argv` (without node and script) into `out`, which arrives holding the defaults, and return
 * it. Only syntax and per-flag values are checked here; rules between flags belong to the caller.
 * `given`, when passed, receives the name of every flag that appeared (to tell "left at its default"
 * from "set to the default value").
 */
export function parseFlags<T extends { help: boolean }>(argv: readonly string[], flags: FlagTable<T>, out: T, given?: Set<string>): T {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') {
      out.help = true;
      continue;
    }
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument '${arg}'`);
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    const spec = Object.hasOwn(flags, name) ? flags[name] : undefined;
    if (!spec) throw new UsageError(`unknown flag '--${name}'`);
    let value: string | undefined = eq === -1 ? undefined : arg.slice(eq + 1);
    if (value === undefined) {
      const next = argv[i + 1];
      if (spec.kind === 'bool') {
        // A bare boolean flag means true; `--flag false` is accepted too.
        if (next !== undefined && (BOOL_TRUE.has(next.toLowerCase()) || BOOL_FALSE.has(next.toLowerCase()))) {
          value = next;
          i++;
        } else {
          value = 'true';
        }
      } else {
        if (next === undefined || next.startsWith('--')) throw new UsageError(`flag '--${name}' needs a value`);
        value = next;
        i++;
      }
    }
    // an inert flag's value is checked like any other, into a scratch object, and dropped
    if (spec.key === undefined) assign({}, name, { ...spec, key: 'inert', kind: spec.kind === 'strings' ? 'string' : spec.kind }, value);
    else assign(out as unknown as Record<string, unknown>, name, { ...spec, key: spec.key }, value);
    given?.add(name);
  }
  return out;
}

function assign(target: Record<string, unknown>, name: string, spec: FlagSpec & { key: string }, value: string): void {
  switch (spec.kind) {
    case 'string':
    case 'strings':
      if (spec.pattern !== undefined && !spec.pattern.test(value)) {
        throw new UsageError(`flag '--${name}' expects ${spec.format ?? `a value matching ${String(spec.pattern)}`}, got '${value}'`);
      }
      if (spec.kind === 'string') target[spec.key] = value;
      else (target[spec.key] as string[]).push(value);
      return;
    case 'int': {
      const lower = value.toLowerCase();
      if (spec.intBool === true && (lower === 'true' || lower === 'false')) {
        target[spec.key] = lower === 'true' ? 1 : 0;
        return;
      }
      if (!/^-?\d+$/.test(value)) throw new UsageError(`flag '--${name}' expects an integer, got '${value}'`);
      const n = Number(value);
      if (!Number.isSafeInteger(n) || (spec.min !== undefined && n < spec.min)) {
        throw new UsageError(`flag '--${name}' must be an integer >= ${spec.min ?? 0}, got '${value}'`);
      }
      if (spec.max !== undefined && n > spec.max) throw new UsageError(`flag '--${name}' must be an integer <= ${spec.max}, got '${value}'`);
      target[spec.key] = n;
      return;
    }
    case 'number': {
      const n = Number(value);
      if (!NUMBER.test(value) || !Number.isFinite(n)) throw new UsageError(`flag '--${name}' expects a number, got '${value}'`);
      if (spec.min !== undefined && n < spec.min) throw new UsageError(`flag '--${name}' must be a number >= ${spec.min}, got '${value}'`);
      if (spec.max !== undefined && n > spec.max) throw new UsageError(`flag '--${name}' must be a number <= ${spec.max}, got '${value}'`);
      target[spec.key] = n;
      return;
    }
    case 'bool': {
      const v = value.toLowerCase();
      if (BOOL_TRUE.has(v)) target[spec.key] = true;
      else if (BOOL_FALSE.has(v)) target[spec.key] = false;
      else throw new UsageError(`flag '--${name}' expects true or false, got '${value}'`);
      return;
    }
    case 'enum': {
      const match = spec.values!.find((v) => v === value || (spec.ignoreCase === true && v.toLowerCase() === value.toLowerCase()));
      if (match === undefined) throw new UsageError(`flag '--${name}' must be one of ${spec.values!.join(', ')}; got '${value}'`);
      target[spec.key] = match;
      return;
    }
  }
}

/** Where flag help text starts in `--help` output. */
const HELP_COLUMN = 44;

/** One help line per flag, in table order (an inert flag's help says it has no effect), without `--help`. */
function tableHelpLines(flags: { readonly [flag: string]: FlagSpec }): string[] {
  const lines: string[] = [];
  for (const [name, spec] of Object.entries(flags)) {
    const arg =
      spec.kind === 'bool'
        ? '[=BOOL]'
        : spec.kind === 'int'
          ? '=N'
          : spec.kind === 'number'
            ? '=F'
            : spec.kind === 'enum'
              ? `=${spec.values!.join('|')}`
              : spec.format !== undefined
                ? `=${spec.format}`
                : '=VALUE';
    const flag = `  --${name}${arg}`;
    const help = spec.inert === undefined ? spec.help : `${spec.help} Accepted; no effect here: ${spec.inert}`;
    // a flag wider than the column gets its help on the next line, aligned
    lines.push(flag.length < HELP_COLUMN ? flag.padEnd(HELP_COLUMN) + help : `${flag}\n${' '.repeat(HELP_COLUMN)}${help}`);
  }
  return lines;
}

const HELP_LINE = '  --help'.padEnd(HELP_COLUMN) + 'Print this help.';

/** One help line per flag, in table order, then `--help`. */
export function flagHelpLines(flags: { readonly [flag: string]: FlagSpec }): string[] {
  return [...tableHelpLines(flags), HELP_LINE];
}

/** `--help` first, then each group under its title, as tritonserver prints its usage. */
export function flagGroupHelpLines<T>(groups: ReadonlyArray<FlagGroup<T>>): string[] {
  const lines = [HELP_LINE];
  for (const group of groups) {
    if (Object.keys(group.flags).length === 0) continue;
    lines.push('', `${group.title}:`, ...tableHelpLines(group.flags));
  }
  return lines;
}

/**
 * The per-pool argument template of the local connector: the flags one `switchyard worker` replica of
 * a pool is started with, holding placeholders for what differs between replicas. Pure: no IO.
 *
 * Placeholders (the closed set, {@link TEMPLATE_PLACEHOLDERS}):
 *   {http_port} {grpc_port} {metrics_port} {kv_transfer_port}   a free TCP port chosen for the replica
 *                                                               (each distinct, chosen at spawn time)
 *   {replica}                                                   the replica's id (`<pool>-<time>-<random>`)
 *   {pool}                                                      the pool (aggregated | prefill | decode)
 * A literal brace is written `{{` or `}}`. Anything else in braces, an unpaired brace or an empty
 * template is refused with invalid_argument when the connector is created, never at spawn time.
 *
 * Example (aggregated pool):
 *   --model-repository=/models --etcd=http://127.0.0.1:2379 --nats=nats://127.0.0.1:4222
 *   --http-port={http_port} --grpc-port={grpc_port} --metrics-port={metrics_port}
 *   --kv-transfer-port={kv_transfer_port}
 */
import { invalidArgument } from '@switchyard/common';

/** The port placeholders: each one present in a template gets its own free port per replica. */
export const PORT_PLACEHOLDERS = ['http_port', 'grpc_port', 'metrics_port', 'kv_transfer_port'] as const;
export type PortPlaceholder = (typeof PORT_PLACEHOLDERS)[number];
/** Every placeholder a template may hold. */
export const TEMPLATE_PLACEHOLDERS = [...PORT_PLACEHOLDERS, 'replica', 'pool'] as const;
export type TemplatePlaceholder = (typeof TEMPLATE_PLACEHOLDERS)[number];

/** At most this many arguments in a template, and this many characters in one argument. */
export const MAX_TEMPLATE_ARGS = 256;
export const MAX_TEMPLATE_ARG_LENGTH = 4096;

/** One argument cut into literal text and placeholders. */
type Piece = { readonly text: string } | { readonly placeholder: TemplatePlaceholder };

/** A checked template: {@link parseWorkerTemplate}'s result, expanded by {@link expandWorkerTemplate}. */
export interface WorkerTemplate {
  readonly args: readonly (readonly Piece[])[];
  /** The port placeholders it uses, in {@link PORT_PLACEHOLDERS} order. */
  readonly ports: readonly PortPlaceholder[];
}

/** What fills a template for one replica. */
export interface TemplateValues {
  readonly replica: string;
  readonly pool: string;
  readonly ports: Readonly<Partial<Record<PortPlaceholder, number>>>;
}

const isPlaceholder = (name: string): name is TemplatePlaceholder => (TEMPLATE_PLACEHOLDERS as readonly string[]).includes(name);

/** Checks a template (`what` names it in errors, e.g. `pool decode`). Throws invalid_argument. */
export function parseWorkerTemplate(args: unknown, what = 'template'): WorkerTemplate {
  if (!Array.isArray(args)) throw invalidArgument(`${what}: expected a list of arguments`);
  if (args.length === 0) throw invalidArgument(`${what}: empty`);
  if (args.length > MAX_TEMPLATE_ARGS) throw invalidArgument(`${what}: ${args.length} arguments, at most ${MAX_TEMPLATE_ARGS}`);
  const used = new Set<PortPlaceholder>();
  const parsed = args.map((arg: unknown, i) => {
    if (typeof arg !== 'string') throw invalidArgument(`${what}: argument ${i} is not a string`);
    if (arg.length > MAX_TEMPLATE_ARG_LENGTH) throw invalidArgument(`${what}: argument ${i} is longer than ${MAX_TEMPLATE_ARG_LENGTH} characters`);
    if (arg.includes('\0')) throw invalidArgument(`${what}: argument ${i} holds a NUL character`);
    const pieces = parseArgument(arg, `${what}: argument ${i} ('${arg.slice(0, 80)}')`);
    for (const p of pieces) if ('placeholder' in p && (PORT_PLACEHOLDERS as readonly string[]).includes(p.placeholder)) used.add(p.placeholder as PortPlaceholder);
    return pieces;
  });
  return { args: parsed, ports: PORT_PLACEHOLDERS.filter((p) => used.has(p)) };
}

function parseArgument(arg: string, where: string): Piece[] {
  const pieces: Piece[] = [];
  let text = '';
  for (let i = 0; i < arg.length; i++) {
    const c = arg[i]!;
    if (c === '{' && arg[i + 1] === '{') (text += '{'), i++;
    else if (c === '}' && arg[i + 1] === '}') (text += '}'), i++;
    else if (c === '}') throw invalidArgument(`${where}: unpaired '}' (write '}}' for a literal brace)`);
    else if (c === '{') {
      const end = arg.indexOf('}', i + 1);
      if (end < 0) throw invalidArgument(`${where}: unclosed '{' (write '{{' for a literal brace)`);
      const name = arg.slice(i + 1, end);
      if (!isPlaceholder(name)) throw invalidArgument(`${where}: unknown placeholder {${name.slice(0, 40)}}; known: ${TEMPLATE_PLACEHOLDERS.map((p) => `{${p}}`).join(' ')}`);
      if (text !== '') pieces.push({ text }), (text = '');
      pieces.push({ placeholder: name });
      i = end;
    } else text += c;
  }
  if (text !== '' || pieces.length === 0) pieces.push({ text });
  return pieces;
}

/** The replica's arguments. Throws invalid_argument when a port the template uses has no value (a bug of the caller). */
export function expandWorkerTemplate(template: WorkerTemplate, values: TemplateValues): string[] {
  return template.args.map((pieces) =>
    pieces
      .map((p) => {
        if ('text' in p) return p.text;
        if (p.placeholder === 'replica') return values.replica;
        if (p.placeholder === 'pool') return values.pool;
        const port = values.ports[p.placeholder];
        if (port === undefined || !Number.isInteger(port) || port < 1 || port > 65535) throw invalidArgument(`no port for {${p.placeholder}}`);
        return String(port);
      })
      .join(''),
  );
}

/**
 * Health, metadata, configuration, statistics and model-repository endpoints. Each handler reads
 * its (size-limited) body if it takes one, calls the engine, and writes Triton's JSON. Lookup
 * errors come from the engine with Triton's messages and are rendered by the caller.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { internal, invalidArgument, unsupported } from '@switchyard/common';
import type { LoadModelOptions, ModelMetadata, ModelStatistics, StatisticDuration } from '@switchyard/engine';
import { type JsonObject, type JsonValue, isDoubleLiteralMember, isJsonObject, parseJson } from '@switchyard/kserve';
import { renderModelConfigJson } from '@switchyard/model-config';
import { readBody } from './http-body.js';
import type { HttpContext } from './http-context.js';
import { sendEmpty, sendJson } from './http-reply.js';

export function handleHealth(ctx: HttpContext, res: ServerResponse, which: 'live' | 'ready'): void {
  const ok = which === 'live' ? ctx.engine.isLive() : ctx.engine.isReady();
  sendEmpty(res, ok ? 200 : 400);
}

export function handleServerMetadata(ctx: HttpContext, res: ServerResponse): void {
  const m = ctx.engine.serverMetadata();
  sendJson(res, 200, JSON.stringify({ name: m.name, version: m.version, extensions: m.extensions }));
}

export function handleModelMetadata(ctx: HttpContext, res: ServerResponse, model: string, version: number | undefined): void {
  const m: ModelMetadata = ctx.engine.modelMetadata(model, version);
  const tensor = (t: ModelMetadata['inputs'][number]) => ({ name: t.name, datatype: t.datatype, shape: t.shape });
  sendJson(
    res,
    200,
    JSON.stringify({ name: m.name, versions: m.versions, platform: m.platform, inputs: m.inputs.map(tensor), outputs: m.outputs.map(tensor) }),
  );
}

export function handleModelReady(ctx: HttpContext, res: ServerResponse, model: string, version: number | undefined): void {
  if (ctx.engine.isModelReady(model, version)) sendEmpty(res, 200);
  else sendJson(res, 400, JSON.stringify({ error: 'Model version not ready' }));
}

export function handleModelConfig(ctx: HttpContext, res: ServerResponse, model: string, version: number | undefined): void {
  sendJson(res, 200, renderModelConfigJson(ctx.engine.modelConfig(model, version)));
}

export async function handleModelStats(ctx: HttpContext, res: ServerResponse, model: string | undefined, version: number | undefined): Promise<void> {
  const stats = await ctx.engine.modelStatistics(model, version);
  sendJson(res, 200, JSON.stringify({ model_stats: stats.map(statisticsJson) }));
}

/** Statistics in Triton's key order (`tritonserver.cc` ModelStatistics). */
function statisticsJson(s: ModelStatistics): unknown {
  const d = (x: StatisticDuration) => ({ count: x.count, ns: x.ns });
  const i = s.inference_stats;
  return {
    name: s.name,
    version: s.version,
    last_inference: s.last_inference,
    inference_count: s.inference_count,
    execution_count: s.execution_count,
    inference_stats: {
      success: d(i.success),
      fail: d(i.fail),
      queue: d(i.queue),
      compute_input: d(i.compute_input),
      compute_infer: d(i.compute_infer),
      compute_output: d(i.compute_output),
      cache_hit: d(i.cache_hit),
      cache_miss: d(i.cache_miss),
    },
    response_stats: s.response_stats,
    batch_stats: s.batch_stats.map((b) => ({
      batch_size: b.batch_size,
      compute_input: d(b.compute_input),
      compute_infer: d(b.compute_infer),
      compute_output: d(b.compute_output),
    })),
    memory_usage: s.memory_usage.map((m) => ({ type: m.type, id: m.id, byte_size: m.byte_size })),
  };
}

/** Parse an optional JSON body: empty → undefined. */
async function optionalJsonBody(ctx: HttpContext, req: IncomingMessage): Promise<JsonValue | undefined> {
  const body = await readBody(req, ctx.maxInputSize);
  return body.byteLength === 0 ? undefined : parseJson(body);
}

export async function handleRepositoryIndex(ctx: HttpContext, req: IncomingMessage, res: ServerResponse, repository: string | undefined): Promise<void> {
  const body = await optionalJsonBody(ctx, req);
  let ready = false;
  if (isJsonObject(body) && 'ready' in body) {
    if (typeof body.ready !== 'boolean') throw invalidArgument("Invalid value for 'ready': expected a boolean");
    ready = body.ready;
  }
  void repository; // Triton ignores the repository name on index
  const entries = await ctx.engine.repositoryIndex(ready);
  const json = entries.map((e) => {
    const o: Record<string, string> = { name: e.name };
    if (e.version !== undefined) o.version = e.version;
    if (e.state !== undefined) o.state = e.state;
    if (e.reason !== undefined) o.reason = e.reason;
    return o;
  });
  sendJson(res, 200, JSON.stringify(json));
}

export async function handleRepositoryControl(
  ctx: HttpContext,
  req: IncomingMessage,
  res: ServerResponse,
  route: { repository?: string; model: string; action: 'load' | 'unload' },
): Promise<void> {
  if (route.repository !== undefined && route.repository !== '') throw unsupported("'repository_name' specification is not supported");
  const body = await optionalJsonBody(ctx, req);
  const params = isJsonObject(body) && isJsonObject(body.parameters) ? body.parameters : undefined;
  if (route.action === 'load') {
    await ctx.engine.loadModel(route.model, loadOptions(params));
  } else {
    let unloadDependents = false;
    if (params !== undefined && 'unload_dependents' in params) {
      if (typeof params.unload_dependents !== 'boolean') {
        throw internal("Unable to parse 'unload_dependents': attempt to access JSON non-boolean as boolean");
      }
      unloadDependents = params.unload_dependents;
    }
    await ctx.engine.unloadModel(route.model, { unloadDependents });
  }
  sendEmpty(res, 200, { 'Content-Type': 'application/json' });
}

/** Load parameters: `config` (ModelConfig JSON string) and `file:<path>` (base64 file contents). */
function loadOptions(params: JsonObject | undefined): LoadModelOptions {
  const options: LoadModelOptions = {};
  if (params === undefined) return options;
  for (const key of Object.keys(params)) {
    const v = params[key] as JsonValue;
    // Triton reads every member with MemberAsString: a non-string value is refused with its words
    // (as a client error). File names are checked by the engine's confined resolver, for both doors.
    if (key === 'config') {
      if (typeof v !== 'string') throw invalidArgument('attempt to access JSON non-string as string');
      options.config = v;
    } else if (key.startsWith('file:')) {
      if (typeof v !== 'string') throw invalidArgument('attempt to access JSON non-string as string');
      const path = key.slice('file:'.length);
      options.files ??= new Map();
      options.files.set(path, new Uint8Array(Buffer.from(v, 'base64')));
    } else {
      throw invalidArgument(`Unrecognized load parameter '${key}' with type '${parameterTypeName(params, key)}'`);
    }
  }
  return options;
}

/** TRITONSERVER_ParameterTypeString of the value a JSON member would become. */
function parameterTypeName(params: JsonObject, key: string): string {
  const v = params[key];
  if (typeof v === 'boolean') return 'BOOL';
  if (typeof v === 'bigint') return 'INT';
  if (typeof v === 'number') return Number.isInteger(v) && !isDoubleLiteralMember(params, key) ? 'INT' : 'DOUBLE';
  return 'STRING';
}

/**
 * Triton extension endpoints backed by server-side state: system shared memory (the shared
 * `SharedMemoryManager`), CUDA shared memory (answered as a server without GPUs), trace settings
 * and logging settings (the shared `ServerSettings`).
 *
 * Register/unregister of either kind of shared memory is refused with 501 unless client shared
 * memory is enabled (`--allow-client-shm=true`); status is always answered.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { internal, invalidArgument, notFound } from '@switchyard/common';
import { type JsonObject, type JsonValue, isDoubleLiteralMember, isJsonObject, parseJson } from '@switchyard/kserve';
import type { LogSettings } from '../settings.js';
import { readBody } from './http-body.js';
import type { HttpContext } from './http-context.js';
import { sendEmpty, sendJson } from './http-reply.js';

type ShmAction = 'status' | 'register' | 'unregister';
const JSON_HEADERS = { 'Content-Type': 'application/json' };

async function jsonBody(ctx: HttpContext, req: IncomingMessage): Promise<JsonValue> {
  return parseJson(await readBody(req, ctx.maxInputSize));
}

export async function handleSystemSharedMemory(
  ctx: HttpContext,
  req: IncomingMessage,
  res: ServerResponse,
  region: string | undefined,
  action: ShmAction,
): Promise<void> {
  if (action === 'status') {
    sendJson(res, 200, JSON.stringify(ctx.shm.status(region)));
    return;
  }
  ctx.shm.assertEnabled();
  if (action === 'unregister') {
    ctx.shm.unregister(region);
    sendEmpty(res, 200, JSON_HEADERS);
    return;
  }
  if (region === undefined || region === '') {
    throw invalidArgument("'region name' is necessary to register system shared memory region");
  }
  const body = await jsonBody(ctx, req);
  const obj: JsonObject = isJsonObject(body) ? body : {};
  if (!('key' in obj)) throw invalidArgument("Shared memory register request has no 'key' field");
  if (typeof obj.key !== 'string') throw internal('attempt to access JSON non-string as string');
  const offset = 'offset' in obj ? uint(obj, 'offset') : 0;
  if (!('byte_size' in obj)) throw invalidArgument("Shared memory register request has no 'byte_size' field");
  const byteSize = uint(obj, 'byte_size');
  ctx.shm.register(region, obj.key, offset, byteSize);
  sendEmpty(res, 200, JSON_HEADERS);
}

export async function handleCudaSharedMemory(
  ctx: HttpContext,
  req: IncomingMessage,
  res: ServerResponse,
  region: string | undefined,
  action: ShmAction,
): Promise<void> {
  // No GPUs: no region can ever be registered.
  if (action === 'status') {
    if (region !== undefined && region !== '') throw notFound(`Unable to find cuda shared memory region: '${region}'`);
    sendJson(res, 200, '[]');
    return;
  }
  ctx.shm.assertEnabled();
  if (action === 'unregister') {
    sendEmpty(res, 200, JSON_HEADERS);
    return;
  }
  if (region === undefined || region === '') {
    throw invalidArgument("'region name' is necessary to register cuda shared memory region");
  }
  await jsonBody(ctx, req); // Triton parses the body first: a malformed one is a parse error
  throw invalidArgument(`failed to register CUDA shared memory region: '${region}', GPUs not supported`);
}

export async function handleTrace(ctx: HttpContext, req: IncomingMessage, res: ServerResponse, model: string | undefined): Promise<void> {
  if (model !== undefined && !ctx.engine.isModelReady(model)) {
    throw invalidArgument(`Request for unknown model : ${model}`);
  }
  if (req.method === 'POST') {
    const body = await jsonBody(ctx, req);
    const patch = isJsonObject(body) ? (body as Record<string, string | string[] | null>) : {};
    ctx.settings.updateTraceSettings(model, patch);
  }
  sendJson(res, 200, JSON.stringify(ctx.settings.traceSettings(model)));
}

export async function handleLogging(ctx: HttpContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method === 'POST') {
    const body = await jsonBody(ctx, req);
    const obj: JsonObject = isJsonObject(body) ? body : {};
    checkLogTypes(obj);
    ctx.settings.updateLogSettings(obj);
  }
  const s: LogSettings = ctx.settings.logSettings();
  sendJson(
    res,
    200,
    JSON.stringify({
      log_file: s.log_file,
      log_info: s.log_info,
      log_warning: s.log_warning,
      log_error: s.log_error,
      log_verbose_level: s.log_verbose_level,
      log_format: s.log_format,
    }),
  );
}

/** Type errors as Triton's HTTP handler reports them (TritonJson accessors, INTERNAL). */
function checkLogTypes(obj: JsonObject): void {
  if (obj.log_file !== undefined && obj.log_file !== null) return; // settings refuses it (501)
  for (const key of ['log_info', 'log_warning', 'log_error']) {
    const v = obj[key];
    if (v !== undefined && v !== null && typeof v !== 'boolean') throw internal('attempt to access JSON non-boolean as boolean');
  }
  const verbose = obj.log_verbose_level;
  if (verbose !== undefined && verbose !== null) uint(obj, 'log_verbose_level');
  const format = obj.log_format;
  if (format !== undefined && format !== null && typeof format !== 'string') throw internal('attempt to access JSON non-string as string');
}

function uint(obj: JsonObject, key: string): number {
  const v = obj[key];
  const ok = (typeof v === 'number' && Number.isInteger(v) && v >= 0 && !isDoubleLiteralMember(obj, key)) || (typeof v === 'bigint' && v >= 0n);
  if (!ok) throw internal('attempt to access JSON non-unsigned-integer as unsigned-integer');
  return Number(v);
}

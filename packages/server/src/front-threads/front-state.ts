/**
 * What an HTTP front thread knows of the engine: the READY models it may serve infer requests for
 * itself, and how. The main thread builds a `FrontState` from its engine and trace settings and
 * sends it to every front thread whenever a model version starts or stops serving, or the trace
 * settings change; a thread answers from the last state it got.
 *
 * A model is served by a front thread only when the main thread's own handler would do nothing the
 * thread cannot: not decoupled (the HTTP infer route refuses those), and not possibly traced (trace
 * level not OFF for it: the sampler and its counters live on the main thread). Anything else — an
 * unknown or unready model, a version the state does not list — goes to the main thread, whose
 * handler answers exactly as without threads. So a stale state costs a hop, never a wrong answer:
 * the engine still checks every request it runs.
 *
 * Pure: plain data (structured-cloneable), no engine or IO here but `buildFrontState`'s reads.
 */
import type { InferenceEngine } from '@switchyard/engine';

/** How a front thread serves one model version's infer requests. */
export interface FrontModel {
  /** The model batches (`max_batch_size > 0`): the response encoder's `batching` option. */
  readonly batching: boolean;
}

export interface FrontModelVersions {
  /** What a request naming no version gets (the engine's own choice of version). */
  readonly latest: FrontModel | undefined;
  /** READY versions by number. */
  readonly versions: ReadonlyMap<number, FrontModel>;
}

export interface FrontState {
  /** Models a front thread serves itself, by name. */
  readonly models: ReadonlyMap<string, FrontModelVersions>;
}

export const EMPTY_FRONT_STATE: FrontState = { models: new Map() };

/** The model version a front thread may serve, or undefined: the main thread answers. */
export function frontModel(state: FrontState, name: string, version: number | undefined): FrontModel | undefined {
  const m = state.models.get(name);
  if (m === undefined) return undefined;
  return version === undefined ? m.latest : m.versions.get(version);
}

/**
 * The state of `engine` now: every READY version of a model that is neither decoupled nor possibly
 * traced (`mayTrace`). A version whose config cannot be read (unloaded meanwhile) is left out.
 */
export async function buildFrontState(engine: InferenceEngine, mayTrace: (model: string) => boolean): Promise<FrontState> {
  const index = await engine.repositoryIndex(true);
  const models = new Map<string, FrontModelVersions>();
  const names = new Set(index.map((e) => e.name));
  for (const name of names) {
    if (mayTrace(name)) continue;
    const served = (version?: number): FrontModel | undefined => {
      try {
        const config = engine.modelConfig(name, version);
        if (config.model_transaction_policy?.decoupled === true) return undefined;
        return { batching: config.max_batch_size > 0 };
      } catch {
        return undefined;
      }
    };
    const versions = new Map<number, FrontModel>();
    for (const e of index) {
      if (e.name !== name || e.version === undefined) continue;
      const v = Number(e.version);
      if (!Number.isSafeInteger(v)) continue;
      const m = served(v);
      if (m !== undefined) versions.set(v, m);
    }
    const latest = served();
    if (latest !== undefined || versions.size > 0) models.set(name, { latest, versions });
  }
  return { models };
}

/**
 * Model lifecycle: which versions of which models exist, in which state, and the operations
 * that move them (load, reload, unload, poll).
 *
 * Per-version states (see `ModelState` in types.ts):
 *   (none) ──load──▶ LOADING ──ok──▶ READY ──unload──▶ UNLOADING ──▶ UNAVAILABLE("unloaded")
 *                       └──fail──▶ UNAVAILABLE(<load error>)
 * A reload of a READY version keeps it READY and serving while the new one loads; the new one
 * replaces it atomically once READY and the old one drains in the background (no downtime).
 * A failed reload keeps the old one serving.
 * Model-level failures (bad config, no version) are kept as `modelError` and shown in the
 * index as a versionless UNAVAILABLE row; they never take down versions already serving.
 *
 * Concurrency: all operations on one model run one at a time (a per-model promise chain);
 * different models proceed independently. Lookups are synchronous and only ever return fully
 * loaded versions.
 */
import { internal, invalidArgument, isSwitchyardError, notFound, unavailable, type SwitchyardError } from '@switchyard/common';
import type { ModelConfig } from '@switchyard/model-config';
import { EnsembleDependencies } from '../ensemble/ensemble-dependencies.js';
import type { EnsemblePort } from '../ensemble/ensemble-port.js';
import type { CompiledEngineOptions } from '../options.js';
import type { LoadedVersion } from './loaded-version.js';
import { LoadSlots } from './load-slots.js';
import { buildBaseConfig, failureReason, loadVersion, type LoaderContext } from './model-loader.js';
import { materializeOverride, readModelSource, type ModelSource, type OverrideFolder } from './model-source.js';
import { listRepositoryModels, locateModel, selectVersions, unknownModelLoadMessage, validateModelName } from '../repository.js';
import type { LoadModelOptions, ModelIndexEntry, ModelState } from '../types.js';

export const UNLOADED_REASON = 'unloaded';

interface VersionSlot {
  version: number;
  state: ModelState;
  reason: string;
  /** The version requests go to; set only once fully loaded. */
  serving: LoadedVersion | undefined;
  /** Change stamps the serving version was loaded from. */
  stamp: string;
}

interface ModelRecord {
  name: string;
  slots: Map<number, VersionSlot>;
  modelError: string | undefined;
  /**
   * The model was found but has no version to load: Triton lists it among the model states with
   * no version, which makes a strict server not ready (a config that does not parse, by contrast,
   * leaves the model out of the states).
   */
  noVersion: boolean;
  configStamp: string | undefined;
  /** Stamp of the whole folder at the last repository load attempt (poll skips unchanged). */
  lastStamp: string | undefined;
  chain: Promise<void>;
}

export class ModelLifecycle {
  private readonly records = new Map<string, ModelRecord>();
  private readonly draining = new Set<Promise<void>>();
  private readonly loader: LoaderContext;
  /** Ensembles: load order, dependency checks, cascading unloads (ensemble-dependencies.ts). */
  private readonly ensembles: EnsembleDependencies;
  private readonly changeListeners = new Set<() => void>();
  /** `--model-load-thread-count`: how many models read and build at once. */
  private readonly loadSlots: LoadSlots;

  /** `submitStep`: how ensemble steps reach the engine (see `EnsemblePort.submit`); without it ensembles do not load. */
  constructor(
    private readonly options: CompiledEngineOptions,
    submitStep?: EnsemblePort['submit'],
  ) {
    const port: EnsemblePort | undefined = submitStep && {
      submit: submitStep,
      composingVersion: (name, version) => this.tryResolve(name, version),
    };
    this.loader = {
      autoComplete: options.autoComplete,
      backends: options.backends,
      logger: options.logger,
      ensembles: port,
      limits: options.loadLimits,
      gpus: options.gpus,
      minComputeCapability: options.minComputeCapability,
      ...(options.onLoadStep !== undefined ? { onLoadStep: options.onLoadStep } : {}),
      borrowLoadSlot: () => this.loadSlots.tryTake(),
    };
    this.loadSlots = new LoadSlots(options.modelLoadThreadCount);
    this.ensembles = new EnsembleDependencies({
      roots: options.modelRepositories,
      autoComplete: options.autoComplete,
      ...(options.modelConfigName !== undefined ? { configName: options.modelConfigName } : {}),
      readyVersions: (name) => this.readyVersions(name),
      readyModelNames: () => this.readyModelNames(),
      failureOf: (name) => this.failureOf(name),
    });
  }

  /** See InferenceEngine.onModelChange. */
  onChange(listener: () => void): () => void {
    const entry = (): void => listener();
    this.changeListeners.add(entry);
    return () => this.changeListeners.delete(entry);
  }

  /** A version started or stopped serving (or its serving object was replaced). */
  private changed(): void {
    for (const listener of this.changeListeners) {
      try {
        listener();
      } catch (e) {
        this.options.logger.error({ err: e }, 'model change listener threw');
      }
    }
  }

  private record(name: string): ModelRecord {
    let record = this.records.get(name);
    if (record === undefined) {
      record = { name, slots: new Map(), modelError: undefined, noVersion: false, configStamp: undefined, lastStamp: undefined, chain: Promise.resolve() };
      this.records.set(name, record);
    }
    return record;
  }

  /** Run `op` after every earlier operation on the same model settled. */
  private serialize<T>(name: string, op: (record: ModelRecord) => Promise<T>): Promise<T> {
    const record = this.record(name);
    const result = record.chain.then(() => op(record));
    record.chain = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  /** Load or reload `name` (from the repository, or from the override). Throws on failure. */
  load(name: string, override?: LoadModelOptions): Promise<void> {
    validateModelName(name);
    if (override?.files !== undefined && override.files.size > 0 && override.config === undefined) {
      return Promise.reject(invalidArgument("Load parameter 'config' must be specified for model file override"));
    }
    return this.loadComposing(name, override?.config).then(() => this.serialize(name, (record) => this.loadNow(record, override, false)));
  }

  /**
   * Explicit mode: load (or re-poll) the models ensemble `name` is made of, innermost first, each
   * in its own turn, before `name` itself (so no model waits on another while holding its turn).
   * Failures are left for the ensemble's dependency check to report. Marks `name` loaded by name.
   */
  private async loadComposing(name: string, overrideConfig?: string): Promise<void> {
    this.ensembles.markExplicit(name);
    if (this.options.controlMode !== 'explicit') return;
    for (const dep of await this.ensembles.composingClosure(name, overrideConfig)) {
      await this.serialize(dep, (record) => this.loadNow(record, undefined, false)).catch(() => undefined);
    }
  }

  /**
   * @param onlyIfChanged poll mode: skip when the folder is unchanged since the last attempt,
   *   so a model that failed is not retried (and re-logged) until someone edits it.
   */
  private loadNow(record: ModelRecord, override: LoadModelOptions | undefined, onlyIfChanged: boolean): Promise<void> {
    return this.loadSlots.run(() => this.loadInSlot(record, override, onlyIfChanged));
  }

  private async loadInSlot(record: ModelRecord, override: LoadModelOptions | undefined, onlyIfChanged: boolean): Promise<void> {
    const name = record.name;
    const hasOverride = override !== undefined && (override.config !== undefined || (override.files?.size ?? 0) > 0);
    let folder: OverrideFolder | undefined;
    try {
      let path: string;
      if (override?.files !== undefined && override.files.size > 0) {
        folder = await materializeOverride(override.files);
        path = folder.path;
      } else {
        path = await locateModel(this.options.modelRepositories, name);
      }
      const source = await readModelSource(path, this.options.modelConfigName);
      if (!hasOverride) {
        const stamp = `${source.configStamp}#${[...source.versionStamps].map(([v, st]) => `${v}=${st}`).join('#')}`;
        if (onlyIfChanged && record.lastStamp === stamp) return;
        record.lastStamp = stamp;
      } else {
        record.lastStamp = undefined;
      }
      let base: ModelConfig;
      try {
        base = buildBaseConfig(name, source, override?.config, this.options.autoComplete);
      } catch (e) {
        const message = `${unknownModelLoadMessage(name)}: ${failureReason(e)}`;
        if (record.slots.size === 0) record.modelError = failureReason(e);
        throw override?.config !== undefined ? invalidArgument(message, e) : internal(message, e);
      }
      const versions = selectVersions(base.version_policy, source.versions);
      if (versions.length === 0) {
        if (record.slots.size === 0) {
          record.modelError = 'no version is available';
          record.noVersion = true;
        }
        throw internal(`failed to load '${name}', no version is available`);
      }
      let force = hasOverride;
      if (base.platform === 'ensemble') {
        const check = await this.ensembles.check(base);
        if (check.problem !== undefined) {
          // Like a bad config: the ensemble is not loaded (or no longer), with the reason.
          for (const slot of record.slots.values()) await this.unloadSlot(slot);
          record.slots.clear();
          record.modelError = check.problem;
          throw invalidArgument(`load failed for model '${name}': ${check.problem}`);
        }
        force ||= check.changed;
      }
      record.modelError = undefined;
      record.noVersion = false;
      await this.applyVersions(record, base, source, versions, force);
    } finally {
      await folder?.dispose();
    }
  }

  /** `loadVersion`, tried again up to `modelLoadRetryCount` times when it fails (tritonserver's `--model-load-retry-count`). */
  private async loadVersionWithRetries(name: string, base: ModelConfig, source: ModelSource, version: number): Promise<LoadedVersion> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await loadVersion(this.loader, base, source, version);
      } catch (e) {
        if (attempt > this.options.modelLoadRetryCount) throw e;
        this.options.logger.warn({ model: name, version, attempt, err: failureReason(e) }, 'model version failed to load; retrying');
      }
    }
  }

  private async applyVersions(record: ModelRecord, base: ModelConfig, source: ModelSource, versions: number[], force: boolean): Promise<void> {
    const configChanged = force || record.configStamp !== source.configStamp;
    const wanted = new Set(versions);
    const errors: string[] = [];
    for (const version of versions) {
      const stamp = force ? `override:${Date.now()}` : (source.versionStamps.get(version) ?? '');
      let slot = record.slots.get(version);
      if (slot?.serving !== undefined && slot.state === 'READY' && !configChanged && slot.stamp === stamp) continue;
      if (slot === undefined) {
        slot = { version, state: 'LOADING', reason: '', serving: undefined, stamp: '' };
        record.slots.set(version, slot);
      } else if (slot.serving === undefined) {
        slot.state = 'LOADING';
        slot.reason = '';
      }
      try {
        const loaded = await this.loadVersionWithRetries(record.name, base, source, version);
        const previous = slot.serving;
        slot.serving = loaded;
        slot.state = 'READY';
        slot.reason = '';
        slot.stamp = stamp;
        this.changed();
        if (previous !== undefined) this.drain(previous);
      } catch (e) {
        const reason = failureReason(e);
        this.options.logger.error({ model: record.name, version, err: reason }, 'failed to load model version');
        if (slot.serving === undefined) {
          slot.state = 'UNAVAILABLE';
          slot.reason = reason;
        }
        errors.push(`version ${version} is at UNAVAILABLE state: ${reason};`);
      }
    }
    // After a failure, forget the stamp so the next load retries instead of keeping the old config.
    record.configStamp = errors.length === 0 ? source.configStamp : undefined;
    for (const slot of record.slots.values()) {
      if (wanted.has(slot.version)) continue;
      await this.unloadSlot(slot);
    }
    if (errors.length > 0) throw invalidArgument(`load failed for model '${record.name}': ${errors.join('\n')}`);
  }

  private drain(version: LoadedVersion): void {
    const done = version.unload().finally(() => this.draining.delete(done));
    this.draining.add(done);
  }

  private async unloadSlot(slot: VersionSlot): Promise<void> {
    const serving = slot.serving;
    if (serving !== undefined) {
      slot.state = 'UNLOADING';
      slot.serving = undefined;
      this.changed();
      await serving.unload();
    }
    slot.state = 'UNAVAILABLE';
    slot.reason = UNLOADED_REASON;
  }

  /**
   * Unload every version of `name`, waiting for in-flight requests, after the loaded ensembles
   * that use it. `unloadDependents`: then also the composing models only loaded for ensembles
   * that nothing uses any more (Triton's `unload_dependents`). Unknown names are a no-op.
   */
  async unload(name: string, unloadDependents = false): Promise<void> {
    const config = this.readyVersions(name).at(-1)?.config;
    for (const dependent of this.ensembles.dependents(name)) await this.unloadModel(dependent);
    await this.unloadModel(name);
    this.ensembles.forget(name);
    if (!unloadDependents || config === undefined) return;
    for (const orphan of this.ensembles.orphans(config)) {
      await this.unloadModel(orphan);
      this.ensembles.forget(orphan);
    }
  }

  private unloadModel(name: string): Promise<void> {
    if (!this.records.has(name)) return Promise.resolve();
    return this.serialize(name, async (record) => {
      for (const slot of record.slots.values()) await this.unloadSlot(slot);
      record.modelError = undefined;
      record.noVersion = false;
      record.configStamp = undefined;
      record.lastStamp = undefined;
    });
  }

  /** Unload everything and wait for background drains (shutdown). */
  async unloadAll(): Promise<void> {
    await Promise.all([...this.records.keys()].map((name) => this.unload(name).catch(() => undefined)));
    await Promise.all([...this.draining]);
  }

  /** Load every model in the repositories (start-up in none/poll mode, `*` in explicit). */
  async loadAll(): Promise<void> {
    const listing = await listRepositoryModels(this.options.modelRepositories);
    for (const name of listing.duplicates) {
      const record = this.record(name);
      if (record.slots.size === 0) record.modelError = `failed to poll model '${name}': not unique across all model repositories`;
      this.options.logger.error({ model: name }, 'model is not unique across all model repositories');
    }
    await this.ensembles.inWaves([...listing.models.keys()], (name) => this.loadQuietly(name));
  }

  /** Load and log instead of throwing: start-up and poll never stop on one bad model. */
  async loadQuietly(name: string, onlyIfChanged = false): Promise<void> {
    try {
      validateModelName(name);
      await this.loadComposing(name);
      await this.serialize(name, (record) => this.loadNow(record, undefined, onlyIfChanged));
    } catch (e) {
      this.options.logger.error({ model: name, err: failureReason(e) }, 'failed to load model');
    }
  }

  /** One poll-mode pass: (re)load added or changed models, unload removed ones. */
  async poll(): Promise<void> {
    const listing = await listRepositoryModels(this.options.modelRepositories);
    const present = new Set(listing.models.keys());
    // An ensemble whose composing versions changed is checked again even if its folder did not.
    const work: Promise<void>[] = [this.ensembles.inWaves([...present], (name) => this.loadQuietly(name, !this.ensembles.composingChanged(name)))];
    for (const [name, record] of this.records) {
      if (present.has(name)) continue;
      const live = [...record.slots.values()].some((s) => s.serving !== undefined);
      if (live || record.modelError !== undefined) {
        work.push(
          this.unload(name).then(() => {
            record.lastStamp = undefined;
          }),
        );
      }
    }
    await Promise.all(work);
  }

  /** Triton's repository index: every known model, per version; on-disk-only models by name. */
  async index(readyOnly: boolean): Promise<ModelIndexEntry[]> {
    const listing = await listRepositoryModels(this.options.modelRepositories).catch(() => ({ models: new Map(), duplicates: new Set<string>() }));
    const names = new Set<string>([...listing.models.keys(), ...listing.duplicates, ...this.records.keys()]);
    const rows: ModelIndexEntry[] = [];
    for (const name of [...names].sort()) {
      const record = this.records.get(name);
      const slots = record === undefined ? [] : [...record.slots.values()].sort((a, b) => a.version - b.version);
      if (slots.length > 0) {
        for (const slot of slots) {
          if (readyOnly && slot.state !== 'READY') continue;
          const row: ModelIndexEntry = { name, version: String(slot.version), state: slot.state };
          if (slot.reason !== '') row.reason = slot.reason;
          rows.push(row);
        }
      } else if (record?.modelError !== undefined) {
        if (!readyOnly) rows.push({ name, state: 'UNAVAILABLE', reason: record.modelError });
      } else if (!readyOnly && (listing.models.has(name) || listing.duplicates.has(name))) {
        rows.push({ name });
      }
    }
    return rows;
  }

  /** Strict readiness: no version is loading, unloading or failed (unloaded on purpose is fine). */
  allVersionsReady(): boolean {
    for (const record of this.records.values()) {
      if (record.noVersion && record.slots.size === 0) return false;
      for (const slot of record.slots.values()) {
        if (slot.state === 'READY') continue;
        if (slot.state === 'UNAVAILABLE' && slot.reason === UNLOADED_REASON) continue;
        return false;
      }
    }
    return true;
  }

  /**
   * Start-up, tritonserver's "failed to load all models" check: every model the start-up loads
   * tried (all of them in none/poll mode, the `--load-model` ones in explicit mode) is known, has a
   * version, and every version is READY. A model whose config does not parse, a name given twice
   * across repositories or a `--load-model` name that is not in the repositories all fail it.
   */
  allLoaded(): boolean {
    for (const record of this.records.values()) {
      if (record.modelError !== undefined || record.slots.size === 0) return false;
      for (const slot of record.slots.values()) if (slot.state !== 'READY') return false;
    }
    return true;
  }

  /** Why `name` has no READY version: its model-level error (`invalid`), else a failed version's reason. */
  failureOf(name: string): { invalid?: string; failed?: string } {
    const record = this.records.get(name);
    if (record === undefined) return {};
    if (record.modelError !== undefined) return { invalid: record.modelError };
    const failed = [...record.slots.values()].find((s) => s.state === 'UNAVAILABLE' && s.reason !== UNLOADED_REASON);
    return failed === undefined ? {} : { failed: failed.reason };
  }

  /** READY versions of a model, ascending. */
  readyVersions(name: string): LoadedVersion[] {
    const record = this.records.get(name);
    if (record === undefined) return [];
    return [...record.slots.values()]
      .filter((s) => s.state === 'READY' && s.serving !== undefined)
      .sort((a, b) => a.version - b.version)
      .map((s) => s.serving as LoadedVersion);
  }

  /** Every model name with at least one READY version, sorted. */
  readyModelNames(): string[] {
    return [...this.records.keys()].filter((n) => this.readyVersions(n).length > 0).sort();
  }

  /**
   * The version a request for (`name`, `version`) goes to: the given one, or the highest READY.
   * Throws Triton's lookup errors (§8).
   */
  resolve(name: string, version?: number): LoadedVersion {
    const record = this.records.get(name);
    if (record === undefined || record.slots.size === 0) {
      throw invalidArgument(`Request for unknown model: '${name}' is not found`);
    }
    if (version === undefined) {
      // Hot path: the highest READY version, without allocating.
      let latest: VersionSlot | undefined;
      for (const slot of record.slots.values()) {
        if (slot.state === 'READY' && slot.serving !== undefined && (latest === undefined || slot.version > latest.version)) latest = slot;
      }
      if (latest === undefined) throw notFound(`Request for unknown model: '${name}' has no available versions`);
      return latest.serving as LoadedVersion;
    }
    const slot = record.slots.get(version);
    if (slot === undefined) throw notFound(`Request for unknown model: '${name}' version ${version} is not found`);
    if (slot.state !== 'READY' || slot.serving === undefined) {
      throw unavailable(`Request for unknown model: '${name}' version ${version} is not at ready state`);
    }
    return slot.serving;
  }

  /** `resolve` without throwing. */
  tryResolve(name: string, version?: number): LoadedVersion | SwitchyardError {
    try {
      return this.resolve(name, version);
    } catch (e) {
      if (isSwitchyardError(e)) return e;
      throw e;
    }
  }
}

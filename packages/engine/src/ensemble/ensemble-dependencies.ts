/**
 * Ensembles in the model lifecycle (Triton's dependency graph in model_repository_manager.cc):
 * which models an ensemble needs, in what order models load, whether an ensemble may load now,
 * and what goes down with a model that unloads. The lifecycle owns one `EnsembleDependencies`
 * and calls it at those points; nothing here changes model state itself.
 *
 * Rules, as in Triton:
 * - An ensemble loads only after its composing models: start-up and poll load in waves (models
 *   that are not ensembles first, then each ensemble once its composing ensembles are done); in
 *   explicit mode loading an ensemble first loads (or re-polls) its composing models.
 * - An ensemble may load when every composing model is available with a READY version (and the
 *   version a step names, if any), no ensemble cycle leads back to it, and its steps fit the
 *   composing models' configs (`validateEnsembleComposition`). Otherwise the ensemble does not
 *   load, with Triton's reason; this is a model-level failure (like a bad config), not a version's.
 * - Unloading a model first unloads the loaded ensembles that use it, directly or not.
 *   `unload_dependents` also unloads the requested model's composing models that were only
 *   loaded for ensembles (never by name) and that no loaded ensemble uses any more.
 */
import { isSwitchyardError } from '@switchyard/common';
import { normalizeModelConfig, validateModelConfig, type ModelConfig } from '@switchyard/model-config';
import { composingModelNames, ensembleSteps } from './ensemble-plan.js';
import { validateEnsembleComposition } from './ensemble-validation.js';
import type { LoadedVersion } from '../model/loaded-version.js';
import { buildBaseConfig } from '../model/model-loader.js';
import { readModelSource } from '../model/model-source.js';
import { locateModel } from '../repository.js';

/** What the lifecycle tells about its models. */
export interface DependencyHost {
  readonly roots: readonly string[];
  readonly autoComplete: boolean;
  /** `--model-config-name`: which configuration file a model folder is read with. */
  readonly configName?: string;
  /** READY versions of a model, ascending. */
  readyVersions(name: string): LoadedVersion[];
  readyModelNames(): string[];
  /** Why a model has no READY version: its model-level error (`invalid`), else a failed version's reason. */
  failureOf(name: string): { invalid?: string; failed?: string };
}

export interface EnsembleCheck {
  /** Triton's reason the ensemble may not load now; undefined when it may. */
  problem: string | undefined;
  /** The composing versions differ from the ones of the last check: loaded versions must be rebuilt. */
  changed: boolean;
}

const isEnsemble = (config: ModelConfig | undefined): config is ModelConfig => config?.platform === 'ensemble';

export class EnsembleDependencies {
  /** Models loaded by name (API, --load-model, every model in none/poll mode), not only for an ensemble. */
  private readonly explicit = new Set<string>();
  /** Ensemble → its composing models and the versions its last check saw. */
  private readonly checked = new Map<string, { deps: string[]; key: string }>();
  private readonly versionIds = new WeakMap<LoadedVersion, number>();
  private nextVersionId = 1;

  constructor(private readonly host: DependencyHost) {}

  markExplicit(name: string): void {
    this.explicit.add(name);
  }

  /** `name` was unloaded on request: it no longer counts as loaded by name. */
  forget(name: string): void {
    this.explicit.delete(name);
  }

  /** The config of `name` as on disk, or the override; undefined when it cannot be read or parsed. */
  async peek(name: string, overrideConfig?: string): Promise<ModelConfig | undefined> {
    try {
      const source = await readModelSource(await locateModel(this.host.roots, name), this.host.configName);
      return buildBaseConfig(name, source, overrideConfig, this.host.autoComplete);
    } catch {
      return undefined;
    }
  }

  /**
   * Explicit mode: every model `name` needs, innermost first, each once (Triton's polling chain).
   * Stops at cycles; the check of the ensemble reports them.
   */
  async composingClosure(name: string, overrideConfig?: string): Promise<string[]> {
    const order: string[] = [];
    const seen = new Set<string>([name]);
    const visit = async (config: ModelConfig | undefined): Promise<void> => {
      if (!isEnsemble(config)) return;
      for (const dep of composingModelNames(config)) {
        if (seen.has(dep)) continue;
        seen.add(dep);
        await visit(await this.peek(dep));
        order.push(dep);
      }
    };
    await visit(await this.peek(name, overrideConfig));
    return order;
  }

  /** Load `names` in waves (see the module comment); `load` never rejects. */
  async inWaves(names: readonly string[], load: (name: string) => Promise<void>): Promise<void> {
    const configs = new Map(await Promise.all(names.map(async (n) => [n, await this.peek(n)] as const)));
    let pending = names.filter((n) => isEnsemble(configs.get(n)));
    await Promise.all(names.filter((n) => !isEnsemble(configs.get(n))).map(load));
    while (pending.length > 0) {
      const waiting = new Set(pending);
      let wave = pending.filter((n) => !composingModelNames(configs.get(n) as ModelConfig).some((d) => waiting.has(d)));
      if (wave.length === 0) wave = pending; // a cycle: load them anyway, their checks report it
      await Promise.all(wave.map(load));
      pending = pending.filter((n) => !wave.includes(n));
    }
  }

  /** Poll: the composing versions of ensemble `name` changed since its last check (re-check it). */
  composingChanged(name: string): boolean {
    const last = this.checked.get(name);
    return last !== undefined && last.key !== this.composingKey(last.deps);
  }

  /** Triton's `CheckNode` and `ValidateEnsembleConfig` for ensemble `config` about to load. */
  async check(config: ModelConfig): Promise<EnsembleCheck> {
    const deps = composingModelNames(config);
    const key = this.composingKey(deps);
    const changed = this.checked.get(config.name)?.key !== key;
    this.checked.set(config.name, { deps, key });
    return { problem: await this.problem(config), changed };
  }

  private async problem(config: ModelConfig): Promise<string | undefined> {
    const name = config.name;
    let normalized: ModelConfig;
    try {
      normalized = normalizeModelConfig(config, { modelName: name });
      validateModelConfig(normalized);
    } catch {
      return undefined; // the version load reports the config's own problem
    }
    const deps = composingModelNames(normalized);
    const missing: string[] = [];
    for (const dep of deps) {
      if (this.host.readyVersions(dep).length > 0) continue;
      const failure = this.host.failureOf(dep);
      if (failure.invalid !== undefined || failure.failed !== undefined) continue;
      const onDisk = await locateModel(this.host.roots, dep).then(
        () => true,
        () => false,
      );
      if (!onDisk) missing.push(dep);
    }
    if (missing.length > 0) return `ensemble ${name} contains models that are not available or ambiguous: ${missing.sort().join(', ')}`;
    const cycle = await this.cycleBackTo(name, normalized);
    if (cycle !== undefined) return `circular dependency between ensembles: ${name} -> ... -> ${cycle} -> ${name}`;
    for (const dep of deps) {
      const ready = this.host.readyVersions(dep);
      if (ready.length === 0) {
        const failure = this.host.failureOf(dep);
        if (failure.invalid !== undefined) return `ensemble '${name}' depends on '${dep}' which is not valid. Model '${dep}' failed with error: ${failure.invalid}`;
        if (failure.failed !== undefined) {
          return `ensemble '${name}' depends on '${dep}' which has no loaded version. Model '${dep}' loading failed with error: ${failure.failed}`;
        }
        return `ensemble '${name}' depends on '${dep}' which has no loaded version.`;
      }
      for (const step of ensembleSteps(normalized)) {
        if (step.model_name !== dep || step.model_version < 0) continue;
        if (!ready.some((v) => v.version === step.model_version)) {
          return `ensemble '${name}' depends on '${dep}' whose required version ${step.model_version} is not loaded.`;
        }
      }
    }
    try {
      validateEnsembleComposition(normalized, (dep) => (this.host.readyVersions(dep).at(-1) as LoadedVersion).config);
    } catch (e) {
      if (isSwitchyardError(e)) return e.message;
      throw e;
    }
    return undefined;
  }

  /**
   * The ensemble through which `name`'s composing models lead back to `name`, or undefined.
   * Follows the loaded configs, and the ones on disk for models not loaded.
   */
  private async cycleBackTo(name: string, config: ModelConfig): Promise<string | undefined> {
    const seen = new Set<string>();
    const walk = async (from: string, current: ModelConfig): Promise<string | undefined> => {
      for (const dep of composingModelNames(current)) {
        if (dep === name) return from;
        if (seen.has(dep)) continue;
        seen.add(dep);
        const next = this.host.readyVersions(dep).at(-1)?.config ?? (await this.peek(dep));
        if (!isEnsemble(next)) continue;
        const found = await walk(dep, next);
        if (found !== undefined) return found;
      }
      return undefined;
    };
    return walk(name, config);
  }

  /** Loaded ensembles that use `name`, directly or through other ensembles, outermost first. */
  dependents(name: string): string[] {
    const users = new Map<string, string[]>();
    for (const model of this.host.readyModelNames()) {
      const config = this.host.readyVersions(model).at(-1)?.config;
      if (!isEnsemble(config)) continue;
      for (const dep of composingModelNames(config)) users.set(dep, [...(users.get(dep) ?? []), model]);
    }
    const order: string[] = [];
    const queue = [name];
    for (let head = 0; head < queue.length; head++) {
      for (const user of users.get(queue[head] as string) ?? []) {
        if (user === name || order.includes(user)) continue;
        order.push(user);
        queue.push(user);
      }
    }
    return order.reverse();
  }

  /**
   * For `unload_dependents`, after the ensemble `config` unloaded: its composing models (and
   * theirs) that were never loaded by name and that no loaded ensemble uses any more.
   */
  orphans(config: ModelConfig): string[] {
    const out: string[] = [];
    const stillUsed = (dep: string): boolean => this.dependents(dep).some((user) => !out.includes(user));
    const visit = (current: ModelConfig): void => {
      for (const dep of composingModelNames(current)) {
        if (this.explicit.has(dep) || out.includes(dep) || stillUsed(dep)) continue;
        const depConfig = this.host.readyVersions(dep).at(-1)?.config;
        if (depConfig === undefined) continue;
        out.push(dep);
        visit(depConfig);
      }
    };
    visit(config);
    return out;
  }

  /** Identifies the READY versions of `deps` now. */
  private composingKey(deps: readonly string[]): string {
    return deps
      .map((dep) => `${dep}=${this.host.readyVersions(dep).map((v) => this.versionId(v)).join(',')}`)
      .join(';');
  }

  private versionId(version: LoadedVersion): number {
    let id = this.versionIds.get(version);
    if (id === undefined) {
      id = this.nextVersionId++;
      this.versionIds.set(version, id);
    }
    return id;
  }
}

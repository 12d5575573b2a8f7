/**
 * A model version that finished loading: its final config, backend instances, scheduler and
 * statistics. Requests only ever reach a `LoadedVersion`, so they never see a half-loaded
 * model. The lifecycle owns it and calls `unload()` exactly once.
 */
import type { Logger } from '@switchyard/common';
import type { LlmEndpoint } from '@switchyard/llm';
import type { ModelConfig } from '@switchyard/model-config';
import type { BackendInstance, BackendModel } from '../backend.js';
import type { InferenceJob } from '../inference-job.js';
import type { Scheduler } from '../scheduler.js';
import type { OutputLabels } from '../types.js';
import type { ModelStatsCollector } from '../statistics.js';

export class LoadedVersion {
  private unloading: Promise<void> | undefined;

  constructor(
    readonly name: string,
    readonly version: number,
    readonly config: ModelConfig,
    /** Class labels per output, from the outputs' `label_filename` (classification extension). */
    readonly labels: OutputLabels,
    readonly stats: ModelStatsCollector,
    readonly loadDurationSecs: number,
    private readonly scheduler: Scheduler,
    private readonly instances: readonly BackendInstance[],
    private readonly backendModel: BackendModel,
    private readonly logger: Logger,
  ) {}

  /** The generation endpoint of an LLM version (`llm` / `mocker` backends), else undefined. */
  get llm(): LlmEndpoint | undefined {
    return this.backendModel.llm;
  }

  enqueue(job: InferenceJob): void {
    this.scheduler.enqueue(job);
  }

  cancel(job: InferenceJob): boolean {
    return this.scheduler.cancel(job);
  }

  pendingCount(): number {
    return this.scheduler.pendingCount();
  }

  inflightCount(): number {
    return this.scheduler.inflightCount();
  }

  /** Stop admitting, drain queued and in-flight requests, release the backend. Idempotent. */
  unload(): Promise<void> {
    this.unloading ??= (async () => {
      // Every unload path (explicit, poll, reload, shutdown) comes through here.
      this.backendModel.beginUnload?.();
      await this.scheduler.stop();
      for (const instance of this.instances) {
        await instance.release().catch((e: unknown) => this.logger.warn({ err: e, model: this.name }, 'failed to release instance'));
      }
      await this.backendModel.release().catch((e: unknown) => this.logger.warn({ err: e, model: this.name }, 'failed to release model'));
    })();
    return this.unloading;
  }
}

// repeat_int32: a decoupled JavaScript model (Triton's python_backend examples/decoupled).
//
// For a request with IN = [v0, v1, ...], DELAY = [d0, d1, ...] and WAIT = [w], it sends one
// response per element of IN: the i-th after waiting DELAY[i] ms, with OUT = [IN[i]] and
// IDX = [i], then closes the request. IN of shape [0] gets no response, only the final flag.
// `execute` returns after WAIT ms, while responses may still be on their way, so one instance
// serves several requests at once and their responses interleave.
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class TritonModel {
  initialize(args) {
    this.pb = args.pb;
    if (args.model_config.model_transaction_policy?.decoupled !== true) {
      throw new args.pb.TritonError(
        `the model \`${args.model_name}\` can generate any number of responses per request, enable decoupled transaction policy in model configuration to serve this model`,
      );
    }
    this.inflight = new Set();
  }

  async execute(requests) {
    for (const request of requests) {
      const sender = request.responseSender();
      const values = request.input('IN').data;
      const delays = request.input('DELAY').data;
      const wait = request.input('WAIT').data[0];
      if (delays.length !== values.length) {
        sender.send({ error: new this.pb.TritonError(`expected DELAY to have the shape of IN, got ${delays.length} and ${values.length} elements`, this.pb.ErrorCode.INVALID_ARG) }, { final: true });
        continue;
      }
      const task = this.respond(sender, values, delays);
      this.inflight.add(task);
      void task.finally(() => this.inflight.delete(task));
      await sleep(wait);
    }
  }

  async respond(sender, values, delays) {
    const { Response, Tensor } = this.pb;
    for (let i = 0; i < values.length; i++) {
      await sleep(delays[i]);
      if (sender.isCancelled()) break;
      sender.send(new Response({ outputs: [new Tensor('OUT', Int32Array.of(values[i])), new Tensor('IDX', Uint32Array.of(i))] }));
    }
    sender.send(undefined, { final: true });
  }

  async finalize() {
    // Let responses already on their way finish before the instance goes away.
    await Promise.allSettled([...this.inflight]);
  }
}

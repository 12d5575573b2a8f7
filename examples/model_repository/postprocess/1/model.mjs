// postprocess: step 3 of the text_pipeline ensemble. For each row of PROBABILITIES, LABEL is the
// name of the most likely class (config parameter "labels", comma-separated, in class order).
export class TritonModel {
  initialize(args) {
    this.pb = args.pb;
    this.labels = (args.model_config.parameters?.labels?.string_value ?? '').split(',');
  }

  execute(requests) {
    const { Response, Tensor, TritonError } = this.pb;
    return requests.map((request) => {
      const probabilities = request.input('PROBABILITIES');
      const classes = probabilities.shape.at(-1);
      if (classes !== this.labels.length) {
        return new Response({ error: new TritonError(`expected ${this.labels.length} classes, got ${classes}`, 'invalid_argument') });
      }
      const rows = probabilities.data.length / classes;
      const labels = [];
      for (let row = 0; row < rows; row++) {
        const scores = probabilities.data.subarray(row * classes, (row + 1) * classes);
        labels.push(this.labels[scores.indexOf(Math.max(...scores))]);
      }
      return new Response({ outputs: [Tensor.fromStrings('LABEL', labels, [rows, 1])] });
    });
  }
}

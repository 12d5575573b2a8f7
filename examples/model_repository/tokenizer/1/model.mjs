// tokenizer: step 1 of the text_pipeline ensemble. Each row's string is lowercased and split into
// words (runs of letters and digits); each word becomes a token id, 1 + FNV-1a(word) mod
// (vocab_size - 1), the same function as `textTokenId` in packages/onnx-builder/src/models.ts,
// which built text_classifier's embedding. Rows are padded with 0 or cut to sequence_length.
export class TritonModel {
  initialize(args) {
    this.pb = args.pb;
    const param = (key, fallback) => Number(args.model_config.parameters?.[key]?.string_value ?? fallback);
    this.vocabSize = param('vocab_size', 1024);
    this.length = param('sequence_length', 16);
  }

  tokenId(word) {
    let h = 0x811c9dc5;
    for (const byte of Buffer.from(word, 'utf8')) h = Math.imul(h ^ byte, 0x01000193) >>> 0;
    return 1 + (h % (this.vocabSize - 1));
  }

  execute(requests) {
    const { Response, Tensor } = this.pb;
    return requests.map((request) => {
      const rows = request.input('TEXT').strings();
      const tokens = new BigInt64Array(rows.length * this.length);
      rows.forEach((text, row) => {
        const words = text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((w) => w !== '');
        words.slice(0, this.length).forEach((word, i) => {
          tokens[row * this.length + i] = BigInt(this.tokenId(word));
        });
      });
      return new Response({ outputs: [new Tensor('TOKENS', tokens, [rows.length, this.length])] });
    });
  }
}

/**
 * Scripted LLMs for the end-to-end suites: model folders whose ONNX decoder
 * (`buildScriptedDecoderModel`) answers a fixed reply whatever the prompt, with the tiny model's
 * tokenizer files and a Qwen-style chat template that renders `tools`, assistant `tool_calls` and
 * tool results. The config.pbtxt files are the fixture's (test/fixtures/tool_call_repository).
 */
import { Tokenizer } from '@switchyard/llm';
import { buildScriptedDecoderModel, buildTinyTokenizerFiles, tinySpecialTokenIds } from '@switchyard/onnx-builder';

/** Qwen 2.5's tool layout, cut down: tools in a system turn, calls as <tool_call> JSON, results as <tool_response>. */
export const TOOL_TEMPLATE = `{%- if tools %}<|im_start|>system
# Tools
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools><|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant
{{ message.content }}
{%- for call in message.tool_calls %}<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`;

let tokenizer: Tokenizer | undefined;
/** The tiny model's tokenizer (the one the scripted folders carry). */
export function tinyTokenizer(): Tokenizer {
  const files = buildTinyTokenizerFiles();
  tokenizer ??= Tokenizer.fromJson(JSON.parse(files['tokenizer.json']), JSON.parse(files['tokenizer_config.json']), JSON.parse(files['config.json']));
  return tokenizer;
}

/** The files of version 1 of `model`, answering `reply` (then EOS). */
export function scriptedModelFiles(model: string, reply: string): Record<string, Uint8Array> {
  const t = tinyTokenizer();
  const ids = tinySpecialTokenIds();
  const onnx = buildScriptedDecoderModel({
    vocabSize: t.vocabSize,
    markerTokenId: ids.imStart,
    // the generation prompt ends `<|im_start|>assistant\n`
    offset: t.encode('assistant\n', { addSpecialTokens: false }).length,
    script: [...t.encode(reply, { addSpecialTokens: false }), ids.imEnd],
  });
  const enc = new TextEncoder();
  const tok = buildTinyTokenizerFiles();
  return {
    [`${model}/1/model.onnx`]: onnx,
    [`${model}/1/tokenizer.json`]: enc.encode(tok['tokenizer.json']),
    [`${model}/1/tokenizer_config.json`]: enc.encode(tok['tokenizer_config.json']),
    [`${model}/1/config.json`]: enc.encode(tok['config.json']),
    [`${model}/1/chat_template.jinja`]: enc.encode(TOOL_TEMPLATE),
  };
}

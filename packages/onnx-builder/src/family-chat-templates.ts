/**
 * Chat templates in the shape of four model families' own (written for this project; the layouts,
 * control tokens and tool-call formats are the families', the wording is ours). Each renders what
 * `transformers`' `apply_chat_template` passes: `messages` (content a string or a list of
 * `{type: "text", text}` parts), `tools` (OpenAI function tools as sent), `add_generation_prompt`,
 * the special token strings (`bos_token`, `eos_token`) and extra keywords (`enable_thinking`).
 *
 * - Qwen3: ChatML turns; tools as JSON lines inside `<tools>` in a system turn; the assistant answers
 *   calls as `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`; tool results go back in a user
 *   turn as `<tool_response>`; `enable_thinking=false` pre-fills an empty `<think>` block.
 * - Llama 3.x: `<|start_header_id|>role<|end_header_id|>\n\n … <|eot_id|>`; a system header with the
 *   knowledge cut-off and date; tools (pretty JSON) in the first user turn; calls as
 *   `{"name": …, "parameters": …}`; tool results in an `ipython` turn.
 * - Mistral (v3 tokenizer): `<s>[AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS][INST] … [/INST]`, calls as
 *   `[TOOL_CALLS] [{"name", "arguments", "id"}]</s>` with 9-character ids, results in `[TOOL_RESULTS]`.
 * - Gemma 3: `<start_of_turn>user|model\n … <end_of_turn>\n`, the system text folded into the first
 *   user turn, content parts iterated (text trimmed, images as `<start_of_image>`); tools (ours: Gemma
 *   ships none) listed in the first user turn, calls answered as a Python list `[f(a=1)]`.
 */

export const QWEN3_CHAT_TEMPLATE = `{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
{{- '# Tools\\n\\nThese functions are available to help with the request.\\n\\nTheir signatures, inside <tools></tools> XML tags:\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}
{{- '\\n</tools>\\n\\nTo call a function, answer a JSON object with its name and arguments inside <tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.content is string %}{%- set content = message.content %}{%- else %}{%- set content = '' %}{%- endif %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}
{%- elif message.role == 'assistant' %}
{%- if '</think>' in content %}{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}
{{- '<|im_start|>assistant\\n' + content }}
{%- if message.tool_calls %}
{%- for call in message.tool_calls %}
{%- if (loop.first and content) or not loop.first %}{{- '\\n' }}{%- endif %}
{%- if call.function %}{%- set call = call.function %}{%- endif %}
{{- '<tool_call>\\n{"name": "' + call.name + '", "arguments": ' }}
{%- if call.arguments is string %}{{- call.arguments }}{%- else %}{{- call.arguments | tojson }}{%- endif %}
{{- '}\\n</tool_call>' }}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}
{%- endif %}`;

export const LLAMA3_CHAT_TEMPLATE = `{{- bos_token }}
{%- if not date_string is defined %}{%- set date_string = '26 Jul 2024' %}{%- endif %}
{%- if not tools is defined %}{%- set tools = none %}{%- endif %}
{%- if messages[0].role == 'system' %}
{%- set system_message = messages[0].content | trim %}
{%- set messages = messages[1:] %}
{%- else %}
{%- set system_message = '' %}
{%- endif %}
{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}
{%- if tools is not none %}{{- 'Environment: ipython\\n' }}{%- endif %}
{{- 'Cutting Knowledge Date: December 2023\\nToday Date: ' + date_string + '\\n\\n' }}
{{- system_message + '<|eot_id|>' }}
{%- if tools is not none %}
{%- if messages | length == 0 %}{{- raise_exception('Tools need a user message to go with.') }}{%- endif %}
{%- set first_user = messages[0].content | trim %}
{%- set messages = messages[1:] %}
{{- '<|start_header_id|>user<|end_header_id|>\\n\\n' }}
{{- 'Answer with a function call from the list below, as JSON in the form {"name": function name, "parameters": dictionary of argument name and its value}. Use no variables.\\n\\n' }}
{%- for tool in tools %}{{- tool | tojson(indent=4) }}{{- '\\n\\n' }}{%- endfor %}
{{- first_user + '<|eot_id|>' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'tool' or message.role == 'ipython' %}
{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' }}
{%- if message.content is mapping %}{{- message.content | tojson }}{%- else %}{{- message.content }}{%- endif %}
{{- '<|eot_id|>' }}
{%- elif message.tool_calls %}
{%- if message.tool_calls | length != 1 %}{{- raise_exception('One tool call per message.') }}{%- endif %}
{%- set call = message.tool_calls[0].function %}
{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n{"name": "' + call.name + '", "parameters": ' + (call.arguments | tojson) + '}<|eot_id|>' }}
{%- else %}
{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + (message.content | trim) + '<|eot_id|>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}`;

export const MISTRAL_CHAT_TEMPLATE = `{%- if messages[0].role == 'system' %}
{%- set system_message = messages[0].content %}
{%- set loop_messages = messages[1:] %}
{%- else %}
{%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}{%- set tools = none %}{%- endif %}
{%- set ns = namespace(last_user=-1) %}
{%- for message in loop_messages %}{%- if message.role == 'user' %}{%- set ns.last_user = loop.index0 %}{%- endif %}{%- endfor %}
{{- bos_token }}
{%- for message in loop_messages %}
{%- if message.role == 'user' %}
{%- if tools is not none and loop.index0 == ns.last_user %}
{{- '[AVAILABLE_TOOLS] [' }}
{%- for tool in tools %}
{{- '{"type": "function", "function": {"name": "' + tool.function.name + '", "description": ' + ((tool.function.description or '') | tojson) + ', "parameters": ' + ((tool.function.parameters or {}) | tojson) + '}}' }}
{%- if not loop.last %}{{- ', ' }}{%- endif %}
{%- endfor %}
{{- '][/AVAILABLE_TOOLS]' }}
{%- endif %}
{%- if loop.index0 == ns.last_user and system_message is defined %}
{{- '[INST] ' + system_message + '\\n\\n' + message.content + '[/INST]' }}
{%- else %}
{{- '[INST] ' + message.content + '[/INST]' }}
{%- endif %}
{%- elif message.tool_calls %}
{{- '[TOOL_CALLS] [' }}
{%- for call in message.tool_calls %}
{%- if call.id is not defined or call.id | length != 9 %}{{- raise_exception('Tool call ids must be 9 letters and digits.') }}{%- endif %}
{{- '{"name": "' + call.function.name + '", "arguments": ' + (call.function.arguments | tojson) + ', "id": "' + call.id + '"}' }}
{%- if not loop.last %}{{- ', ' }}{%- endif %}
{%- endfor %}
{{- ']' + eos_token }}
{%- elif message.role == 'assistant' %}
{{- ' ' + (message.content | trim) + eos_token }}
{%- elif message.role == 'tool' %}
{{- '[TOOL_RESULTS] {"content": ' + (message.content | tojson) + ', "call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
{%- else %}
{{- raise_exception('Only a first system message, then user, assistant and tool messages are supported.') }}
{%- endif %}
{%- endfor %}`;

export const GEMMA3_CHAT_TEMPLATE = `{{ bos_token }}
{%- if messages[0].role == 'system' -%}
{%- if messages[0].content is string -%}{%- set first_user_prefix = messages[0].content + '\\n\\n' -%}
{%- else -%}{%- set first_user_prefix = messages[0].content[0].text + '\\n\\n' -%}{%- endif -%}
{%- set loop_messages = messages[1:] -%}
{%- else -%}
{%- set first_user_prefix = '' -%}
{%- set loop_messages = messages -%}
{%- endif -%}
{%- if tools -%}
{%- set ns = namespace(listing='You may call these functions:\\n') -%}
{%- for tool in tools -%}{%- set ns.listing = ns.listing + (tool.function | tojson) + '\\n' -%}{%- endfor -%}
{%- set first_user_prefix = first_user_prefix + ns.listing + 'To call them, answer only a Python list of calls: [func_name(param=value), ...]\\n\\n' -%}
{%- endif -%}
{%- for message in loop_messages -%}
{%- if message.role == 'assistant' -%}{%- set role = 'model' -%}{%- else -%}{%- set role = message.role -%}{%- endif -%}
{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') }}
{%- if message.tool_calls -%}
{{ '[' }}{%- for call in message.tool_calls -%}{{ call.function.name + '(' }}
{%- for key, value in call.function.arguments.items() -%}{{ key + '=' + (value | tojson) }}{%- if not loop.last -%}{{ ', ' }}{%- endif -%}{%- endfor -%}
{{ ')' }}{%- if not loop.last -%}{{ ', ' }}{%- endif -%}{%- endfor -%}{{ ']' }}
{%- elif message.content is string -%}
{{ message.content | trim }}
{%- elif message.content is iterable -%}
{%- for item in message.content -%}
{%- if item.type == 'image' -%}{{ '<start_of_image>' }}{%- elif item.type == 'text' -%}{{ item.text | trim }}{%- endif -%}
{%- endfor -%}
{%- else -%}
{{ raise_exception('Invalid content type') }}
{%- endif -%}
{{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}`;

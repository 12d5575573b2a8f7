/**
 * `JsonCallScanner`: one tool call written as a JSON object (`{"name": "f", "arguments": {...}}`, as
 * Hermes, Llama 3 JSON and Mistral models write them), read one character at a time so that a
 * streaming parser can send the name as soon as it is complete and the arguments while they arrive.
 *
 * The arguments value (key `arguments`, or `parameters` as Llama 3 writes it) is re-written as
 * Python's `json.dumps` lays it out (vLLM's parsers re-serialise it so): no whitespace outside
 * strings except one space after every `:` and `,`; strings and numbers as the model wrote them.
 * This layout is a prefix-stable function of the input, so pieces sent early are never taken back.
 *
 * No recursion: nesting is a counter, so any depth costs nothing but its characters.
 */

const ARGUMENT_KEYS = new Set(['arguments', 'parameters']);

const isWs = (c: string): boolean => c === ' ' || c === '\n' || c === '\t' || c === '\r';

type Phase = 'before' | 'key' | 'keyString' | 'colon' | 'value' | 'inValue' | 'afterValue' | 'done' | 'failed';

export class JsonCallScanner {
  /** The object's text so far (from its first character, leading whitespace included). */
  raw = '';
  /** The function name, once its string value is complete. */
  name: string | undefined;
  /** Characters of the arguments value so far (laid out as json.dumps does). */
  argsLength = 0;
  /** The arguments text not yet taken (`takeArgs`). */
  private argsPending = '';
  /** An arguments key was met. */
  argsSeen = false;
  /** The arguments value is complete. */
  argsEnded = false;
  private phase: Phase = 'before';
  private keyText = '';
  private key = '';
  private target: 'name' | 'args' | 'other' = 'other';
  private nameText = '';
  private valueType: 'string' | 'container' | 'primitive' = 'primitive';
  private depth = 0;
  private inString = false;
  private escaped = false;

  /** The object closed and is valid JSON. */
  get done(): boolean {
    return this.phase === 'done';
  }
  /** The text is not a call object (or its JSON is broken); nothing more is read. */
  get failed(): boolean {
    return this.phase === 'failed';
  }

  /**
   * Read characters of `text` until the object closes or fails (or, with `untilArgumentsEnd`, until
   * the arguments value is complete); returns how many were read.
   */
  feed(text: string, untilArgumentsEnd = false): number {
    let i = 0;
    while (i < text.length && this.phase !== 'done' && this.phase !== 'failed' && !(untilArgumentsEnd && this.argsEnded)) this.step(text[i++] as string);
    return i;
  }

  private step(c: string): void {
    this.raw += c;
    switch (this.phase) {
      case 'before':
        if (isWs(c)) return;
        if (c === '{') this.phase = 'key';
        else this.phase = 'failed';
        return;
      case 'key':
        if (isWs(c)) return;
        if (c === '"') {
          this.keyText = c;
          this.escaped = false;
          this.phase = 'keyString';
        } else if (c === '}') this.close();
        else this.phase = 'failed';
        return;
      case 'keyString':
        this.keyText += c;
        if (this.escaped) this.escaped = false;
        else if (c === '\\') this.escaped = true;
        else if (c === '"') {
          try {
            this.key = JSON.parse(this.keyText) as string;
            this.phase = 'colon';
          } catch {
            this.phase = 'failed';
          }
        }
        return;
      case 'colon':
        if (isWs(c)) return;
        this.phase = c === ':' ? 'value' : 'failed';
        return;
      case 'value':
        if (isWs(c)) return;
        this.target = this.key === 'name' ? 'name' : ARGUMENT_KEYS.has(this.key) && !this.argsSeen ? 'args' : 'other';
        if (this.target === 'args') this.argsSeen = true;
        if (this.target === 'name') this.nameText = '';
        this.inString = false;
        this.escaped = false;
        if (c === '"') {
          this.valueType = 'string';
          this.inString = true;
        } else if (c === '{' || c === '[') {
          this.valueType = 'container';
          this.depth = 1;
        } else if (c === '-' || (c >= '0' && c <= '9') || c === 't' || c === 'f' || c === 'n') {
          this.valueType = 'primitive';
        } else {
          this.phase = 'failed';
          return;
        }
        this.phase = 'inValue';
        this.append(c);
        return;
      case 'inValue':
        this.inValue(c);
        return;
      case 'afterValue':
        this.afterValue(c);
        return;
      default:
        return;
    }
  }

  private inValue(c: string): void {
    if (this.inString) {
      this.append(c);
      if (this.escaped) this.escaped = false;
      else if (c === '\\') this.escaped = true;
      else if (c === '"') {
        this.inString = false;
        if (this.valueType === 'string') this.endValue();
      }
      return;
    }
    if (this.valueType === 'primitive') {
      if (c === ',' || c === '}' || isWs(c)) {
        this.endValue();
        this.afterValue(c);
      } else this.append(c);
      return;
    }
    // a container, outside strings
    if (isWs(c)) return;
    if (c === '"') this.inString = true;
    else if (c === '{' || c === '[') this.depth++;
    else if (c === '}' || c === ']') this.depth--;
    this.append(c === ':' ? ': ' : c === ',' ? ', ' : c);
    if (this.depth === 0) this.endValue();
  }

  private afterValue(c: string): void {
    if (isWs(c)) return;
    if (c === ',') this.phase = 'key';
    else if (c === '}') this.close();
    else this.phase = 'failed';
  }

  /** The arguments text laid out since the last call: pieces in order, each handed out once. */
  takeArgs(): string {
    const piece = this.argsPending;
    this.argsPending = '';
    return piece;
  }

  private append(text: string): void {
    if (this.target === 'args') {
      this.argsPending += text;
      this.argsLength += text.length;
    }
    else if (this.target === 'name') this.nameText += text;
  }

  private endValue(): void {
    this.phase = 'afterValue';
    if (this.target === 'args') this.argsEnded = true;
    if (this.target !== 'name') return;
    let name: unknown;
    try {
      name = JSON.parse(this.nameText);
    } catch {
      name = undefined;
    }
    if (typeof name === 'string' && name !== '') this.name = name;
    else this.phase = 'failed';
  }

  private close(): void {
    try {
      JSON.parse(this.raw);
      this.phase = 'done';
    } catch {
      this.phase = 'failed';
    }
  }
}

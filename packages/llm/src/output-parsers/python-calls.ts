/**
 * `parsePythonCalls`: a list of Python function calls with literal keyword arguments, as pythonic
 * tool-calling models (Llama 3.2, Llama 4, ToolACE) write them: `[get_weather(city="Paris"), now()]`.
 * Each call's arguments become the JSON text vLLM sends (`json.dumps` of the keyword dict: `", "`
 * and `": "` separators, non-ASCII kept): strings, numbers (as written), `True` / `False` / `None`,
 * lists, tuples (as lists) and dicts. Anything else (an expression, a positional argument) means the
 * text is not a call list: `undefined`. Nesting deeper than `MAX_LITERAL_DEPTH` is refused, so a
 * model's output can never exhaust the stack.
 */

export const MAX_LITERAL_DEPTH = 64;

export interface PythonCall {
  readonly name: string;
  /** JSON text of the keyword arguments, json.dumps layout. */
  readonly arguments: string;
}

class Fail extends Error {}

export function parsePythonCalls(text: string): PythonCall[] | undefined {
  const p = new Reader(text);
  try {
    p.ws();
    p.expect('[');
    const calls: PythonCall[] = [];
    for (;;) {
      p.ws();
      const name = p.identifier(true);
      p.ws();
      p.expect('(');
      const args: string[] = [];
      const seen = new Set<string>();
      p.ws();
      while (!p.eat(')')) {
        const key = p.identifier(false);
        if (seen.has(key)) throw new Fail();
        seen.add(key);
        p.ws();
        p.expect('=');
        p.ws();
        args.push(`${JSON.stringify(key)}: ${p.literal(0)}`);
        p.ws();
        if (p.eat(',')) p.ws();
        else {
          p.expect(')');
          break;
        }
      }
      calls.push({ name, arguments: `{${args.join(', ')}}` });
      p.ws();
      if (p.eat(',')) continue;
      p.expect(']');
      break;
    }
    p.ws();
    return p.atEnd() ? calls : undefined;
  } catch (e) {
    if (e instanceof Fail) return undefined;
    throw e;
  }
}

class Reader {
  private i = 0;
  constructor(private readonly s: string) {}

  atEnd(): boolean {
    return this.i >= this.s.length;
  }
  ws(): void {
    while (this.i < this.s.length && /\s/.test(this.s[this.i] as string)) this.i++;
  }
  eat(c: string): boolean {
    if (this.s.startsWith(c, this.i)) {
      this.i += c.length;
      return true;
    }
    return false;
  }
  expect(c: string): void {
    if (!this.eat(c)) throw new Fail();
  }
  /** A Python identifier; `dotted` allows `module.function`. */
  identifier(dotted: boolean): string {
    const m = (dotted ? /[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*/y : /[A-Za-z_][A-Za-z0-9_]*/y);
    m.lastIndex = this.i;
    const hit = m.exec(this.s);
    if (hit === null) throw new Fail();
    this.i += hit[0].length;
    return hit[0];
  }

  /** One literal, as JSON text in json.dumps layout. */
  literal(depth: number): string {
    if (depth > MAX_LITERAL_DEPTH) throw new Fail();
    const c = this.s[this.i];
    if (c === '"' || c === "'") return JSON.stringify(this.string());
    if (c === '[' || c === '(') {
      const close = c === '[' ? ']' : ')';
      this.i++;
      const items: string[] = [];
      this.ws();
      while (!this.eat(close)) {
        items.push(this.literal(depth + 1));
        this.ws();
        if (this.eat(',')) this.ws();
        else {
          this.expect(close);
          break;
        }
      }
      return `[${items.join(', ')}]`;
    }
    if (c === '{') {
      this.i++;
      const items: string[] = [];
      this.ws();
      while (!this.eat('}')) {
        const key = this.literal(depth + 1);
        // json.dumps writes non-string keys as strings.
        const keyText = key.startsWith('"') ? key : JSON.stringify(key);
        this.ws();
        this.expect(':');
        this.ws();
        items.push(`${keyText}: ${this.literal(depth + 1)}`);
        this.ws();
        if (this.eat(',')) this.ws();
        else {
          this.expect('}');
          break;
        }
      }
      return `{${items.join(', ')}}`;
    }
    for (const [word, json] of [['True', 'true'], ['False', 'false'], ['None', 'null']] as const) {
      if (this.s.startsWith(word, this.i) && !/[A-Za-z0-9_]/.test(this.s[this.i + word.length] ?? '')) {
        this.i += word.length;
        return json;
      }
    }
    const num = /-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?/y;
    num.lastIndex = this.i;
    const hit = num.exec(this.s);
    if (hit === null) throw new Fail();
    this.i += hit[0].length;
    const text = hit[0];
    // JSON has no '1.' or '.5' forms.
    return text.replace(/^(-?)\./, '$10.').replace(/\.(?=[eE]|$)/, '.0');
  }

  /** A single- or double-quoted Python string (no triple quotes, no prefixes). */
  private string(): string {
    const quote = this.s[this.i] as string;
    this.i++;
    let out = '';
    for (;;) {
      const c = this.s[this.i++];
      if (c === undefined || c === '\n') throw new Fail();
      if (c === quote) return out;
      if (c !== '\\') {
        out += c;
        continue;
      }
      const e = this.s[this.i++];
      if (e === undefined) throw new Fail();
      const simple: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', "'": "'", '"': '"', '0': '\0', b: '\b', f: '\f', '\n': '' };
      if (e in simple) out += simple[e];
      else if (e === 'x' || e === 'u' || e === 'U') {
        const len = e === 'x' ? 2 : e === 'u' ? 4 : 8;
        const hex = this.s.slice(this.i, this.i + len);
        if (!new RegExp(`^[0-9a-fA-F]{${len}}$`).test(hex)) throw new Fail();
        const cp = parseInt(hex, 16);
        if (cp > 0x10ffff) throw new Fail();
        out += String.fromCodePoint(cp);
        this.i += len;
      } else out += '\\' + e; // Python keeps unknown escapes as written
    }
  }
}

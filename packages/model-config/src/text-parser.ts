/**
 * `parseModelConfigText`: protobuf text format -> ModelConfig plain object.
 *
 * A recursive descent over the tokens of `text-tokenizer.ts`, driven by protobufjs reflection of
 * `inference.ModelConfig`, following the grammar accepted by protobuf's C++ `TextFormat::Parser`
 * (which is what Triton uses to read config.pbtxt). Output is the `types.ts` shape: snake_case
 * names, enums as names, 64-bit integers as numbers, every scalar/repeated/map field present at
 * its default, unset sub-messages and oneof members absent.
 *
 * Every failure is `invalid_argument` with the message `<fileName>:<line>:<col>: <what>`.
 */
import { invalidArgument, type SwitchyardError } from '@switchyard/common';
import type protobuf from 'protobufjs';
import {
  defaultMessage,
  defaultSlotValue,
  enumNameOf,
  fieldNamed,
  integerValue,
  isEnumName,
  isMapField,
  mapKeySlot,
  messageType,
  qualifiedName,
  setMapEntry,
  valueSlot,
  type ValueSlot,
} from './schema.js';
import { TextFormatSyntaxError, tokenize, type Token } from './text-tokenizer.js';
import type { ModelConfig } from './types.js';

export const DEFAULT_CONFIG_FILE_NAME = 'config.pbtxt';

/** Parse a config.pbtxt; `fileName` only labels error messages. */
export function parseModelConfigText(text: string, fileName: string = DEFAULT_CONFIG_FILE_NAME): ModelConfig {
  const parser = new TextParser(text, fileName);
  return parser.parseRoot(messageType('ModelConfig')) as unknown as ModelConfig;
}

type Obj = Record<string, unknown>;
const utf8 = new TextDecoder();

class TextParser {
  private readonly tokens: readonly Token[];
  private pos = 0;
  /** Fields given so far per message object: proto3 scalars are pre-filled, so presence lives here. */
  private readonly given = new WeakMap<object, Set<string>>();

  constructor(
    text: string,
    private readonly fileName: string,
  ) {
    try {
      this.tokens = tokenize(text);
    } catch (e) {
      if (e instanceof TextFormatSyntaxError) throw this.error(e.line, e.col, e.what);
      throw e;
    }
  }

  parseRoot(type: protobuf.Type): Obj {
    const obj = defaultMessage(type);
    this.parseFields(type, obj, undefined);
    return obj;
  }

  /** Fields until `close` (or end of input for the top level). */
  private parseFields(type: protobuf.Type, obj: Obj, close: '}' | '>' | undefined): void {
    for (;;) {
      const t = this.peek();
      if (close === undefined) {
        if (t.kind === 'eof') return;
        if (t.kind === 'symbol' && (t.text === '}' || t.text === '>')) {
          this.fail(t, `Expected identifier, got: ${t.text}`);
        }
      } else if (this.isSymbol(t, close)) {
        this.pos++;
        return;
      } else if (t.kind === 'eof') {
        this.fail(t, `Expected "${close}".`);
      }
      this.parseField(type, obj);
    }
  }

  private parseField(type: protobuf.Type, obj: Obj): void {
    const t = this.next();
    if (this.isSymbol(t, '[')) {
      this.fail(t, 'Extension and Any field names ("[...]") are not supported in a model configuration.');
    }
    if (t.kind !== 'ident') this.fail(t, `Expected identifier, got: ${t.text || 'end of input'}`);
    const field = fieldNamed(type, t.text);
    if (field === undefined) this.fail(t, `Message type "${qualifiedName(type)}" has no field named "${t.text}".`);

    const isMap = isMapField(field);
    const repeated = field.repeated || isMap;
    const given = this.givenSet(obj);
    if (!repeated) {
      if (given.has(field.name)) this.fail(t, `Non-repeated field "${field.name}" is specified multiple times.`);
      const oneof = field.partOf;
      if (oneof !== null) {
        const other = oneof.oneof.find((n) => n !== field.name && given.has(n));
        if (other !== undefined) {
          this.fail(
            t,
            `Field "${field.name}" is specified along with field "${other}", another member of oneof ` +
              `"${oneof.name}" for type "${qualifiedName(type)}".`,
          );
        }
      }
    }
    given.add(field.name);

    const slot = valueSlot(field);
    if (isMap || slot.kind === 'message') this.tryConsume(':');
    else this.expectSymbol(':');

    if (repeated && this.tryConsume('[')) {
      if (!this.tryConsume(']')) {
        for (;;) {
          this.parseElement(type, field, slot, obj);
          if (this.tryConsume(']')) break;
          this.expectSymbol(',');
        }
      }
    } else {
      this.parseElement(type, field, slot, obj);
    }
    if (!this.tryConsume(';')) this.tryConsume(',');
  }

  /** One value of `field` (one element when repeated, one entry when a map). */
  private parseElement(type: protobuf.Type, field: protobuf.Field, slot: ValueSlot, obj: Obj): void {
    if (isMapField(field)) {
      const [key, value] = this.parseMapEntry(type, field, slot);
      setMapEntry(obj[field.name] as Obj, key, value); // a later entry for the same key wins, as in protobuf
      return;
    }
    const value = this.parseValue(slot);
    if (field.repeated) (obj[field.name] as unknown[]).push(value);
    else obj[field.name] = value;
  }

  /** `{ key: .. value: .. }` of a map field; missing halves take their defaults. */
  private parseMapEntry(type: protobuf.Type, field: protobuf.MapField, valueSlotOfMap: ValueSlot): [string, unknown] {
    const close = this.openBrace();
    const keySlot = mapKeySlot(field);
    const entryName = `${qualifiedName(type)}.${mapEntryTypeName(field.name)}`;
    let key: unknown;
    let value: unknown;
    for (;;) {
      const t = this.next();
      if (this.isSymbol(t, close)) break;
      if (t.kind !== 'ident') this.fail(t, `Expected identifier, got: ${t.text || 'end of input'}`);
      if (t.text !== 'key' && t.text !== 'value') {
        this.fail(t, `Message type "${entryName}" has no field named "${t.text}".`);
      }
      if ((t.text === 'key' ? key : value) !== undefined) {
        this.fail(t, `Non-repeated field "${t.text}" is specified multiple times.`);
      }
      const s = t.text === 'key' ? keySlot : valueSlotOfMap;
      if (s.kind === 'message') this.tryConsume(':');
      else this.expectSymbol(':');
      const v = this.parseValue(s);
      if (t.text === 'key') key = v;
      else value = v;
      if (!this.tryConsume(';')) this.tryConsume(',');
    }
    return [mapKeyString(key ?? defaultSlotValue(keySlot)), value ?? defaultSlotValue(valueSlotOfMap)];
  }

  private parseValue(slot: ValueSlot): unknown {
    switch (slot.kind) {
      case 'message': {
        const close = this.openBrace();
        const obj = defaultMessage(slot.messageType);
        this.parseFields(slot.messageType, obj, close);
        return obj;
      }
      case 'enum':
        return this.parseEnum(slot.name, slot.enumType);
      case 'scalar':
        switch (slot.scalar) {
          case 'bool':
            return this.parseBool(slot.name);
          case 'string':
            return utf8.decode(this.parseStringBytes());
          case 'bytes':
            return this.parseStringBytes();
          case 'float':
          case 'double':
            return this.parseFloat();
          default:
            return this.parseInteger(slot.name, slot.scalar);
        }
    }
  }

  private parseEnum(fieldName: string, enumType: protobuf.Enum): string {
    const t = this.peek();
    if (t.kind === 'ident') {
      this.pos++;
      if (!isEnumName(enumType, t.text)) {
        this.fail(t, `Unknown enumeration value of "${t.text}" for field "${fieldName}".`);
      }
      return t.text;
    }
    if (t.kind === 'int' || this.isSymbol(t, '-')) {
      const n = this.parseInteger(fieldName, 'int32');
      const name = enumNameOf(enumType, n);
      if (name === undefined) this.fail(t, `Unknown enumeration value of "${n}" for field "${fieldName}".`);
      return name;
    }
    return this.fail(t, `Expected integer or identifier, got: ${t.text || 'end of input'}`);
  }

  private parseBool(fieldName: string): boolean {
    const t = this.next();
    if (t.kind === 'ident') {
      if (t.text === 'true' || t.text === 'True' || t.text === 't') return true;
      if (t.text === 'false' || t.text === 'False' || t.text === 'f') return false;
    } else if (t.kind === 'int') {
      const v = parseIntegerToken(t.text);
      if (v === 1n) return true;
      if (v === 0n) return false;
    }
    return this.fail(t, `Invalid value for boolean field "${fieldName}". Value: "${t.text}".`);
  }

  /** One or more adjacent string literals, concatenated. */
  private parseStringBytes(): Uint8Array {
    const first = this.next();
    if (first.kind !== 'string') this.fail(first, `Expected string, got: ${first.text || 'end of input'}`);
    const parts = [first.bytes ?? new Uint8Array(0)];
    while (this.peek().kind === 'string') parts.push(this.next().bytes ?? new Uint8Array(0));
    if (parts.length === 1) return parts[0] as Uint8Array;
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let off = 0;
    for (const p of parts) {
      out.set(p, off);
      off += p.length;
    }
    return out;
  }

  private parseInteger(fieldName: string, kind: 'int32' | 'uint32' | 'int64' | 'uint64'): number {
    const negative = this.tryConsume('-');
    const t = this.next();
    if (t.kind !== 'int') this.fail(t, `Expected integer, got: ${t.text || 'end of input'}`);
    const big = parseIntegerToken(t.text);
    const v = big === undefined ? undefined : integerValue(negative ? -big : big, kind);
    if (v === undefined) {
      this.fail(t, `Integer out of range (${negative ? '-' : ''}${t.text}) for field "${fieldName}" of type ${kind}.`);
    }
    return v;
  }

  private parseFloat(): number {
    const negative = this.tryConsume('-');
    const t = this.next();
    let v: number;
    if (t.kind === 'int') {
      v = Number(parseIntegerToken(t.text) ?? t.text);
    } else if (t.kind === 'float') {
      v = Number(t.text.replace(/[fF]$/, ''));
    } else if (t.kind === 'ident' && /^(inf|infinity)$/i.test(t.text)) {
      v = Infinity;
    } else if (t.kind === 'ident' && /^nan$/i.test(t.text)) {
      v = NaN;
    } else {
      return this.fail(t, `Expected double, got: ${t.text || 'end of input'}`);
    }
    return negative ? -v : v;
  }

  /** Consume `{` or `<` and return the matching close symbol. */
  private openBrace(): '}' | '>' {
    const t = this.next();
    if (this.isSymbol(t, '{')) return '}';
    if (this.isSymbol(t, '<')) return '>';
    return this.fail(t, `Expected "{", found "${t.text || 'end of input'}".`);
  }

  private givenSet(obj: object): Set<string> {
    let s = this.given.get(obj);
    if (s === undefined) {
      s = new Set();
      this.given.set(obj, s);
    }
    return s;
  }

  private peek(): Token {
    return this.tokens[this.pos] ?? (this.tokens[this.tokens.length - 1] as Token);
  }

  private next(): Token {
    const t = this.peek();
    if (t.kind !== 'eof') this.pos++;
    return t;
  }

  private isSymbol(t: Token, s: string): boolean {
    return t.kind === 'symbol' && t.text === s;
  }

  private tryConsume(s: string): boolean {
    if (!this.isSymbol(this.peek(), s)) return false;
    this.pos++;
    return true;
  }

  private expectSymbol(s: string): void {
    const t = this.next();
    if (!this.isSymbol(t, s)) this.fail(t, `Expected "${s}", found "${t.text || 'end of input'}".`);
  }

  private fail(t: Token, what: string): never {
    throw this.error(t.line, t.col, what);
  }

  private error(line: number, col: number, what: string): SwitchyardError {
    return invalidArgument(`${this.fileName}:${line}:${col}: ${what}`);
  }
}

/**
 * Decimal, hex (`0x..`) or octal (`0..`) integer token text to a bigint; undefined for a decimal
 * literal of more than 20 digits, which no 64-bit field holds (BigInt's decimal parse time grows
 * faster than linearly, so a megabyte literal would take seconds).
 */
function parseIntegerToken(text: string): bigint | undefined {
  if (/^0[xX]/.test(text)) return BigInt(text);
  if (text.length > 1 && text.startsWith('0')) return BigInt(`0o${text.slice(1)}`);
  return text.length > 20 ? undefined : BigInt(text);
}

/** Map keys are strings in the plain-object form: integers in decimal, bools as `true`/`false`. */
export function mapKeyString(key: unknown): string {
  return typeof key === 'string' ? key : String(key);
}

/** protoc's name for a map field's entry type (`input_map` -> `InputMapEntry`). */
function mapEntryTypeName(fieldName: string): string {
  const camel = fieldName.replace(/(^|_)([a-z0-9])/g, (_m, _u, c: string) => c.toUpperCase());
  return `${camel}Entry`;
}

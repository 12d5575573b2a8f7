/**
 * `validates(value, schema)`: a small JSON Schema check of the subset guided decoding supports (type,
 * properties, required, additionalProperties, items, minItems, maxItems, enum, const, anyOf, oneOf as
 * anyOf), written apart from the automaton so tests can check its output against the schema.
 */
/** The supported subset, as JSON Schema says it (independent of the compiler). */
export function validates(v: unknown, s: unknown): boolean {
  if (s === true) return true;
  if (s === false) return false;
  const o = s as Record<string, unknown>;
  if (o['const'] !== undefined) return JSON.stringify(v) === JSON.stringify(o['const']);
  if (o['enum'] !== undefined) return (o['enum'] as unknown[]).some((e) => JSON.stringify(e) === JSON.stringify(v)) && (o['type'] === undefined || typeOk(v, o['type']));
  if (o['anyOf'] !== undefined) return (o['anyOf'] as unknown[]).some((x) => validates(v, x));
  if (o['oneOf'] !== undefined) return (o['oneOf'] as unknown[]).some((x) => validates(v, x));
  if (o['type'] !== undefined && !typeOk(v, o['type'])) return false;
  if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
    const props = (o['properties'] ?? {}) as Record<string, unknown>;
    for (const r of (o['required'] ?? []) as string[]) if (!Object.hasOwn(v, r)) return false;
    for (const [k, x] of Object.entries(v)) {
      if (Object.hasOwn(props, k)) {
        if (!validates(x, props[k])) return false;
      } else if (o['additionalProperties'] !== undefined && !validates(x, o['additionalProperties'])) return false;
    }
  }
  if (Array.isArray(v)) {
    if (o['minItems'] !== undefined && v.length < (o['minItems'] as number)) return false;
    if (o['maxItems'] !== undefined && v.length > (o['maxItems'] as number)) return false;
    if (o['items'] !== undefined && !v.every((x) => validates(x, o['items']))) return false;
  }
  return true;
}

function typeOk(v: unknown, t: unknown): boolean {
  const list = Array.isArray(t) ? t : [t];
  return list.some((x) => {
    switch (x) {
      case 'null':
        return v === null;
      case 'boolean':
        return typeof v === 'boolean';
      case 'string':
        return typeof v === 'string';
      case 'number':
        return typeof v === 'number';
      case 'integer':
        return typeof v === 'number' && Number.isInteger(v);
      case 'array':
        return Array.isArray(v);
      default:
        return typeof v === 'object' && v !== null && !Array.isArray(v);
    }
  });
}

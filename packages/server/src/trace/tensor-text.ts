/**
 * A tensor's elements as the text Triton's TENSORS trace level writes (`"data":"1,2,3"`): numbers
 * comma separated, floats with C++ stream defaults (6 significant digits), BOOL as 0/1, BYTES as
 * quoted strings, FP16 / BF16 empty (Triton leaves them out). Pure.
 */
import type { InferTensor } from '@switchyard/kserve';

const WIDTH: Record<string, number> = { BOOL: 1, UINT8: 1, INT8: 1, UINT16: 2, INT16: 2, UINT32: 4, INT32: 4, FP32: 4, UINT64: 8, INT64: 8, FP64: 8 };

/** The data text, or undefined when it would be longer than `maxChars`. */
export function renderTensorData(tensor: InferTensor, maxChars: number): string | undefined {
  const bytes = tensor.data;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const parts: string[] = [];
  let chars = 0;
  const add = (text: string): boolean => {
    chars += text.length + (parts.length > 0 ? 1 : 0);
    if (chars > maxChars) return false;
    parts.push(text);
    return true;
  };
  if (tensor.datatype === 'BYTES') {
    let offset = 0;
    while (offset + 4 <= bytes.byteLength) {
      const len = view.getUint32(offset, true);
      offset += 4;
      if (offset + len > bytes.byteLength) break;
      if (!add(`"${Buffer.from(bytes.buffer, bytes.byteOffset + offset, len).toString('utf8')}"`)) return undefined;
      offset += len;
    }
    return parts.join(',');
  }
  const width = WIDTH[tensor.datatype];
  if (width === undefined) return ''; // FP16, BF16
  for (let offset = 0; offset + width <= bytes.byteLength; offset += width) {
    if (!add(element(tensor.datatype, view, offset))) return undefined;
  }
  return parts.join(',');
}

function element(datatype: string, view: DataView, offset: number): string {
  switch (datatype) {
    case 'BOOL':
      return view.getUint8(offset) === 0 ? '0' : '1';
    case 'UINT8':
      return String(view.getUint8(offset));
    case 'INT8':
      return String(view.getInt8(offset));
    case 'UINT16':
      return String(view.getUint16(offset, true));
    case 'INT16':
      return String(view.getInt16(offset, true));
    case 'UINT32':
      return String(view.getUint32(offset, true));
    case 'INT32':
      return String(view.getInt32(offset, true));
    case 'UINT64':
      return String(view.getBigUint64(offset, true));
    case 'INT64':
      return String(view.getBigInt64(offset, true));
    case 'FP32':
      return formatG(view.getFloat32(offset, true));
    default:
      return formatG(view.getFloat64(offset, true));
  }
}

/** C++ `ostream << double` with default flags: `%g`, 6 significant digits. */
export function formatG(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0' : '0';
  const exp = Math.floor(Math.log10(Math.abs(Number(x.toPrecision(6)))));
  if (exp < -4 || exp >= 6) {
    const [mantissa, e] = x.toExponential(5).split('e') as [string, string];
    const m = mantissa.includes('.') ? mantissa.replace(/0+$/, '').replace(/\.$/, '') : mantissa;
    const n = Number(e);
    return `${m}e${n < 0 ? '-' : '+'}${String(Math.abs(n)).padStart(2, '0')}`;
  }
  const fixed = x.toFixed(Math.max(0, 5 - exp));
  return fixed.includes('.') ? fixed.replace(/0+$/, '').replace(/\.$/, '') : fixed;
}

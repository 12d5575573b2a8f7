/**
 * Sibling/test-only entry: protobuf reflection helpers and the text tokenizer.
 */
export {
  PROTO_DIR_URL,
  defaultMessage,
  jsonNameOf,
  messageType,
  modelConfigProtoRoot,
  qualifiedName,
} from './schema.js';
export { tokenize, TextFormatSyntaxError } from './text-tokenizer.js';
export type { Token, TokenKind } from './text-tokenizer.js';

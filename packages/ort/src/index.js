// @switchyard/ort: the onnxruntime-node boundary. Every caller that builds or reads ONNX Runtime
// tensors (the engine's session thread, the LLM decoder session, test helpers) goes through it.
export * from './ort-tensor.js';
export * from './execution-providers.js';

/**
 * gRPC over TLS against real worker processes (`--grpc-use-ssl`, `--grpc-use-ssl-mutual`), with a
 * grpc-js client built from proto/: what the Node.js line's own TLS decides (from Node 26 on it
 * refuses an IP address as the server name), so CI runs this file on every line users run (`.ci/run`).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import { EPHEMERAL_PORT_ARGS, repoRoot, startWorkerProcess } from '@switchyard/testing';
import { reusePortSupported } from '@switchyard/server';
import { loadGrpcClients, unary } from './lib/grpc-client.js';

const BIN = join(repoRoot(), 'bin', 'switchyard.mjs');
/** Any repository serves: the tests ask the server, not a model (explicit mode loads none). */
const REPO = join(repoRoot(), 'test/fixtures/model_repository');
const EXPLICIT = '--model-control-mode=explicit';

describe('--grpc-use-ssl', () => {
  it('serves gRPC over TLS (mutual: client certificates required); a plaintext client is refused; an unreadable key fails the start', async () => {
    // a self-signed certificate for localhost and 127.0.0.1, its own root (test/fixtures/tls/README.md);
    // the server is named localhost: Node 26's TLS refuses an IP address as the server name
    const named = { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' };
    const dir = join(repoRoot(), 'test/fixtures/tls');
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    const worker = await startWorkerProcess({ modelRepositories: [REPO], args: [EXPLICIT, '--grpc-use-ssl=true', `--grpc-server-cert=${cert}`, `--grpc-server-key=${key}`] });
    const def = protoLoader.loadSync(['grpc_service.proto'], { includeDirs: [join(repoRoot(), 'proto')], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
    const Service = (grpc.loadPackageDefinition(def) as any).inference.GRPCInferenceService;
    const tlsClient = new Service(worker.grpcAddress, grpc.credentials.createSsl(readFileSync(cert)), named);
    const plainClient = loadGrpcClients(worker.grpcAddress).inference;
    try {
      expect(await unary(tlsClient, 'ServerReady', {})).toEqual({ ready: true });
      await expect(unary(plainClient, 'ServerReady', {})).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    } finally {
      tlsClient.close();
      plainClient.close();
      await worker.stop();
    }
    // mutual: the self-signed certificate is the root, and the client's certificate
    const mutual = await startWorkerProcess({ modelRepositories: [REPO], args: [EXPLICIT, '--grpc-use-ssl-mutual=true', `--grpc-server-cert=${cert}`, `--grpc-server-key=${key}`, `--grpc-root-cert=${cert}`] });
    const withCert = new Service(mutual.grpcAddress, grpc.credentials.createSsl(readFileSync(cert), readFileSync(key), readFileSync(cert)), named);
    const withoutCert = new Service(mutual.grpcAddress, grpc.credentials.createSsl(readFileSync(cert)), named);
    try {
      expect(await unary(withCert, 'ServerReady', {})).toEqual({ ready: true });
      await expect(unary(withoutCert, 'ServerReady', {})).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    } finally {
      withCert.close();
      withoutCert.close();
      await mutual.stop();
    }
    const r = spawnSync(process.execPath, [BIN, 'worker', `--model-repository=${REPO}`, EXPLICIT, ...EPHEMERAL_PORT_ARGS, '--grpc-use-ssl', `--grpc-server-cert=${cert}`, `--grpc-server-key=${join(dir, 'absent.pem')}`], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status).toBe(1);
    expect(r.stdout).toContain(`cannot read --grpc-server-key '${join(dir, 'absent.pem')}': ENOENT`);
  });

  it.skipIf(!reusePortSupported())('through gRPC front threads (--grpc-infer-thread-count): the threads do the TLS, mutual included', async () => {
    const named = { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' };
    const dir = join(repoRoot(), 'test/fixtures/tls');
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    const mutual = await startWorkerProcess({
      modelRepositories: [REPO],
      args: [EXPLICIT, '--grpc-infer-thread-count=2', '--grpc-use-ssl-mutual=true', `--grpc-server-cert=${cert}`, `--grpc-server-key=${key}`, `--grpc-root-cert=${cert}`],
    });
    const def = protoLoader.loadSync(['grpc_service.proto'], { includeDirs: [join(repoRoot(), 'proto')], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
    const Service = (grpc.loadPackageDefinition(def) as any).inference.GRPCInferenceService;
    const withCert = new Service(mutual.grpcAddress, grpc.credentials.createSsl(readFileSync(cert), readFileSync(key), readFileSync(cert)), named);
    const withoutCert = new Service(mutual.grpcAddress, grpc.credentials.createSsl(readFileSync(cert)), named);
    const plain = loadGrpcClients(mutual.grpcAddress).inference;
    try {
      expect(await unary(withCert, 'ServerReady', {})).toEqual({ ready: true });
      await expect(unary(withCert, 'ModelReady', { name: 'simple' })).resolves.toEqual({ ready: false });
      await expect(unary(withoutCert, 'ServerReady', {})).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
      await expect(unary(plain, 'ServerReady', {})).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    } finally {
      withCert.close();
      withoutCert.close();
      plain.close();
      await mutual.stop();
    }
  });
});

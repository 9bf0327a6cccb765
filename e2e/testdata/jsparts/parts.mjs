// Sends every kind of part to an A2A agent with the official A2A JS SDK (protocol 1.0,
// over the JSON-RPC or the HTTP+JSON binding) and prints what came back as one JSON
// object on stdout:
//   send:    a message holding text, a file by inline bytes, a file by URL and data, and
//            the artifacts of the Task that answers it (file bytes as sha256 and length);
//   message: a message the agent answers with a Message rather than a Task;
//   stream:  the events of a streamed message whose artifact comes in chunks;
//   refused: the error raised for a file URL whose host the agent may not reach.
// Usage: node parts.mjs <agent card URL> <file URL> <inline file path> <jsonrpc|rest>
import { createHash, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Role, TaskState, roleToJSON, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions } from '@a2a-js/sdk/client';

const [cardURL, fileURL, inlinePath, transport] = process.argv.slice(2);
const bindings = { jsonrpc: 'JSONRPC', rest: 'HTTP+JSON' };
if (!cardURL || !fileURL || !inlinePath || !bindings[transport]) {
  console.error('usage: node parts.mjs <agent card URL> <file URL> <inline file path> <jsonrpc|rest>');
  process.exit(2);
}

// The SDK's own selection: of the card's supportedInterfaces it keeps, per binding, the
// one for protocol 1.0, and takes the first binding in preferredTransports that it has.
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    preferredTransports: [bindings[transport]],
  }),
);
// An empty path makes the resolver fetch the card URL itself.
const client = await factory.createFromUrl(cardURL, '');

// Parts in the SDK's 1.0 shape (the proto's oneof as content.$case): raw bytes are a
// Buffer, which the SDK sends as base64 in the wire's "raw" field.
const part = (content, filename = '', mediaType = '') => ({ content, filename, mediaType, metadata: undefined });
const textPart = (text) => part({ $case: 'text', value: text });

// request is a SendMessageRequest for a user message with id prefix-<random>.
const request = (prefix, parts, configuration = undefined) => ({
  tenant: '',
  message: {
    messageId: `${prefix}-${randomUUID()}`,
    contextId: '',
    taskId: '',
    role: Role.ROLE_USER,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  },
  configuration,
  metadata: undefined,
});

// describePart is a part as printed: its kind, filename, media type, and for a file the
// sha256 and length of its bytes (or its URL), for data the value, for text the text.
function describePart(p) {
  const c = p.content;
  const out = { kind: c?.$case ?? 'none', filename: p.filename, mediaType: p.mediaType };
  if (c?.$case === 'raw') {
    out.sha256 = createHash('sha256').update(c.value).digest('hex');
    out.length = c.value.length;
  } else if (c?.$case === 'url') {
    out.url = c.value;
  } else if (c?.$case === 'data') {
    out.data = c.value;
  } else if (c?.$case === 'text') {
    out.text = c.value;
  }
  return out;
}

const describeArtifact = (a) => ({ artifactId: a.artifactId, name: a.name, parts: a.parts.map(describePart) });

// The SDK gives a Message or a Task with no tag: a Message has messageId (the SDK itself
// tells them apart that way), a Task has id.
const isMessage = (r) => 'messageId' in r;

// 1. Text, a file by bytes, a file by URL and data, blocking.
const inline = await readFile(inlinePath);
const sent = await client.sendMessage(
  request('echo-parts', [
    textPart('echo these'),
    part({ $case: 'raw', value: inline }, 'in.bin', 'application/octet-stream'),
    part({ $case: 'url', value: fileURL }, 'remote.pdf', 'application/pdf'),
    part({ $case: 'data', value: { answer: 42, nested: { ok: true } } }),
  ]),
);
if (isMessage(sent)) {
  throw new Error(`echo-parts: got a Message, want a Task: ${JSON.stringify(sent)}`);
}
const send = {
  kind: 'task',
  state: taskStateToJSON(sent.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED),
  inline: { sha256: createHash('sha256').update(inline).digest('hex'), length: inline.length },
  artifacts: sent.artifacts.map(describeArtifact),
};

// 2. A message the agent answers with a Message.
const answered = await client.sendMessage(request('tck-message-response', [textPart('hi')]));
const message = isMessage(answered)
  ? {
      kind: 'message',
      role: roleToJSON(answered.role),
      text: answered.parts.find((p) => p.content?.$case === 'text')?.content.value ?? null,
    }
  : { kind: 'task', state: taskStateToJSON(answered.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED) };

// 3. A streamed message whose artifact comes in chunks.
const stream = [];
for await (const event of client.sendMessageStream(
  request('tck-stream-artifact-chunked', [textPart('stream')]),
)) {
  const p = event.payload;
  const e = { kind: p?.$case ?? 'none' };
  if (p?.$case === 'task') {
    e.state = taskStateToJSON(p.value.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED);
  } else if (p?.$case === 'statusUpdate') {
    e.state = taskStateToJSON(p.value.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED);
  } else if (p?.$case === 'artifactUpdate') {
    const a = p.value.artifact;
    e.artifactId = a?.artifactId;
    e.name = a?.name;
    e.append = p.value.append;
    e.lastChunk = p.value.lastChunk;
    e.text = (a?.parts ?? [])
      .filter((x) => x.content?.$case === 'text')
      .map((x) => x.content.value)
      .join('');
  } else if (p?.$case === 'message') {
    e.role = roleToJSON(p.value.role);
  }
  stream.push(e);
}

// 4. A file by URL on a host the agent may not reach (localhost; it may reach 127.0.0.1).
const refusedURL = new URL(fileURL);
refusedURL.hostname = 'localhost';
refusedURL.pathname = '/x.pdf';
let refused = null;
try {
  const r = await client.sendMessage(
    request('echo-parts', [part({ $case: 'url', value: refusedURL.href }, 'x.pdf', 'application/pdf')]),
  );
  refused = { error: null, result: isMessage(r) ? 'message' : 'task', state: r.status && taskStateToJSON(r.status.state) };
} catch (e) {
  refused = {
    class: e.constructor?.name,
    name: e.name,
    reason: e.reason,
    transport: e.transport,
    // JSON-RPC errors carry the envelope's code, REST errors the HTTP status.
    code: e.envelopeCode ?? null,
    statusCode: e.statusCode ?? null,
    message: e.message,
    data: e.data,
    metadata: e.metadata,
  };
}

console.log(
  JSON.stringify({
    transport,
    binding: client.transport.protocolName,
    protocolVersion: client.protocolVersion,
    send,
    message,
    stream,
    refused,
  }),
);

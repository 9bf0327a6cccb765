// The fleet test's JavaScript clients: sends tasks to an A2A agent with the official A2A
// JS SDK (protocol 1.0, JSON-RPC), clients numbered from..to-1 at once, n tasks each. Even
// clients send non-blocking tasks, one after the other, into a context of their own; odd
// ones blocking tasks, each in a new context. A task's text is
// "barrier <recorder>/run/<tag>", which the test's capsule fetches. Prints one JSON line
// per send: {client, k, tag, context, blocking, id, state, error}.
// Usage: node fleet.mjs <agent card URL> <recorder URL> <from> <to> <n> <phase>
import { randomUUID } from 'node:crypto';
import { Role, TaskState, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions } from '@a2a-js/sdk/client';

const [cardURL, recorder, fromArg, toArg, nArg, phase] = process.argv.slice(2);
const [from, to, n] = [Number(fromArg), Number(toArg), Number(nArg)];
if (!cardURL || !recorder || !(to > from) || !(n > 0) || !phase) {
  console.error('usage: node fleet.mjs <agent card URL> <recorder URL> <from> <to> <n> <phase>');
  process.exit(2);
}

// request is a SendMessageRequest for one user message with text, in contextId ('' for a
// new context).
const request = (tag, contextId, text) => ({
  tenant: '',
  message: {
    messageId: `${tag}-${randomUUID()}`,
    contextId,
    taskId: '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text }, filename: '', mediaType: '', metadata: undefined }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  },
  configuration: undefined,
  metadata: undefined,
});

async function runClient(c) {
  const blocking = c % 2 === 1;
  // polling makes the SDK send returnImmediately: the answer is the task just admitted.
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      preferredTransports: ['JSONRPC'],
      clientConfig: { polling: !blocking },
    }),
  );
  const client = await factory.createFromUrl(cardURL, '');
  const context = blocking ? '' : `${phase}-js${c}-${randomUUID()}`;
  for (let k = 0; k < n; k++) {
    const tag = `${phase}-js${c}-${k}`;
    const line = { client: c, k, tag, context, blocking };
    try {
      const r = await client.sendMessage(request(tag, context, `barrier ${recorder}/run/${tag}`));
      if ('messageId' in r) {
        line.error = `an answer that is not a task: ${JSON.stringify(r)}`;
      } else {
        line.id = r.id;
        line.state = taskStateToJSON(r.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED);
      }
    } catch (e) {
      line.error = String(e?.message ?? e);
    }
    console.log(JSON.stringify(line));
  }
}

await Promise.all(Array.from({ length: to - from }, (_, i) => runClient(from + i)));

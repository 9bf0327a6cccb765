// Streams one message to an A2A agent with the official A2A JS SDK (protocol 0.3,
// JSON-RPC) and prints each event as one JSON line the moment it arrives, each with
// the milliseconds since the message was sent (ms), so a test can act on the first
// text while the agent is still answering.
// Usage: node stream-lines.mjs <agent card URL> <text>
import { ClientFactory } from '@a2a-js/sdk/client';
import { cardURLArg, message } from './common.mjs';

const cardURL = cardURLArg('stream-lines.mjs');
const text = process.argv[3] ?? 'stream from js';

const client = await new ClientFactory().createFromUrl(cardURL, '');
const start = performance.now();
for await (const event of client.sendMessageStream({ message: message(text) })) {
  process.stdout.write(JSON.stringify({ ms: performance.now() - start, event }) + '\n');
}

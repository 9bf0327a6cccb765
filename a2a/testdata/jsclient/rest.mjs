// Drives an A2A agent with the official A2A JS SDK (protocol 0.3) restricted to its
// HTTP+JSON (REST) transport: resolve the card, send a message (blocking), stream
// another, send one that the agent holds, read it, cancel it, send one it answers with a
// Message, and read a task that does not exist; print what came back as one JSON object on stdout.
// Usage: node rest.mjs <agent card URL>
import { ClientFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { cardURLArg, message } from './common.mjs';

const cardURL = cardURLArg('rest.mjs');

// Only the REST transport is registered, so the client must find an HTTP+JSON
// interface in the card and speak /v1/... to it.
const factory = new ClientFactory({ transports: [new RestTransportFactory()] });
const client = await factory.createFromUrl(cardURL, '');
const card = await client.getAgentCard();

const send = await client.sendMessage({ message: message('hello from js') });

const stream = [];
for await (const event of client.sendMessageStream({ message: message('stream from js') })) {
  stream.push(event);
}

const held = await client.sendMessage({ message: message('hold'), configuration: { blocking: false } });
const get = await client.getTask({ id: held.id, historyLength: 1 });
const cancel = await client.cancelTask({ id: held.id });

// An agent may answer with a Message instead of a task.
const reply = await client.sendMessage({ message: message('reply') });

let missing = null;
try {
  await client.getTask({ id: 'no-such-task' });
} catch (e) {
  missing = { name: e.constructor.name, message: e.message };
}

console.log(JSON.stringify({ card: { name: card.name, url: card.url }, send, stream, get, cancel, reply, missing }));

// Drives an A2A agent with the official A2A JS SDK (protocol 0.3, JSON-RPC transport):
// resolve the agent card, send one message, stream another, and print what came back
// as one JSON object on stdout. Usage: node client.mjs <agent card URL>
import { randomUUID } from 'node:crypto';
import { ClientFactory } from '@a2a-js/sdk/client';

const cardURL = process.argv[2];
if (!cardURL) {
  console.error('usage: node client.mjs <agent card URL>');
  process.exit(2);
}

const message = (text) => ({
  kind: 'message',
  messageId: randomUUID(),
  role: 'user',
  parts: [{ kind: 'text', text }],
});

// An empty path makes the resolver fetch the card URL itself.
const client = await new ClientFactory().createFromUrl(cardURL, '');
const card = await client.getAgentCard();

const send = await client.sendMessage({ message: message('hello from js') });

const stream = [];
for await (const event of client.sendMessageStream({ message: message('stream from js') })) {
  stream.push(event);
}

console.log(JSON.stringify({ card: { name: card.name, url: card.url }, send, stream }));

// Drives an A2A agent with the official A2A JS SDK (protocol 0.3, JSON-RPC transport):
// resolve the agent card, send one message, stream another, and print what came back
// as one JSON object on stdout. Usage: node client.mjs <agent card URL>
import { ClientFactory } from '@a2a-js/sdk/client';
import { cardURLArg, message } from './common.mjs';

const cardURL = cardURLArg('client.mjs');

// An empty path makes the resolver fetch the card URL itself.
const client = await new ClientFactory().createFromUrl(cardURL, '');
const card = await client.getAgentCard();

const send = await client.sendMessage({ message: message('hello from js') });

const stream = [];
for await (const event of client.sendMessageStream({ message: message('stream from js') })) {
  stream.push(event);
}

console.log(JSON.stringify({ card: { name: card.name, url: card.url }, send, stream }));

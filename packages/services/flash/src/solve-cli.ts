/**
 * The bot check's proof of work from a shell: reads a challenge answer (`{"challenge", "difficulty"}`, what
 * POST /api/flash/{deal_id}/challenge returns) on stdin and prints the body of POST .../challenge/answer for the
 * user named on the command line, so a curl session can pipe one call into the next:
 *
 *   curl ... /challenge | node packages/services/flash/dist/src/solve-cli.js alice | curl ... -d @- .../challenge/answer
 *
 * The same search as FlashClient.solve (workers/gateway/tokens.ts solveChallenge): a few hundred thousand SHA-256s at most.
 */
import { solveChallenge } from './workers/gateway/tokens.js';

function fail(message: string): never {
  process.stderr.write(`solve-cli: ${message}\n`);
  process.exit(2);
}

const userId = process.argv[2];
if (userId === undefined || userId === '')
  fail('usage: ... | node solve-cli.js USER_ID   (the challenge answer JSON on stdin)');
const chunks: Buffer[] = [];
for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
let parsed: unknown;
try {
  parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
} catch {
  fail('stdin is not JSON: pipe in the answer of POST /api/flash/{deal_id}/challenge');
}
const { challenge, difficulty } = (parsed ?? {}) as { challenge?: unknown; difficulty?: unknown };
if (
  typeof challenge !== 'string' ||
  typeof difficulty !== 'number' ||
  !Number.isInteger(difficulty) ||
  difficulty < 0 ||
  difficulty > 32
) {
  fail('expected {"challenge": string, "difficulty": integer 0..32}');
}
process.stdout.write(
  JSON.stringify({ user_id: userId, challenge, nonce: solveChallenge(challenge, difficulty) }) + '\n',
);

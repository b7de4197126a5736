/**
 * The one shape of a "propose this command" route, shared by both service contexts: the body is checked as the
 * machine would check it before anything reaches a log, so a malformed command is a 400 `invalid_command` naming
 * the problem, never an entry that every member refuses.
 */
import { CommandShapeError } from './command-shape.js';
import { badRequest } from './errors.js';

/** `check(body)`, with a CommandShapeError answered as 400 `invalid_command`; any other error passes unchanged. */
export function checkedCommand<C>(body: unknown, check: (body: unknown) => C): C {
  try {
    return check(body);
  } catch (error) {
    if (error instanceof CommandShapeError) throw badRequest('invalid_command', error.message);
    throw error;
  }
}

/**
 * The metadata members: one Raft group running the VideoMachine, with a cluster-internal API the app tier and the
 * workers call (cluster token only; the public `/api` surface is the app tier's, workers/app/http.ts). Writes are machine
 * commands checked before they are proposed; reads wait on a read barrier (linearizable) unless asked otherwise.
 *
 * One group, not several: metadata writes are few per video (create, finalize, probe, one claim and one complete
 * per task, publish), and the task queue is claimed across every video, which a single group answers in one
 * entry. README.md says when to split it by video id.
 */
import {
  badRequest,
  HttpError,
  notFound,
  requireObject,
  type RequestContext,
  type ServiceContext,
  type ServiceDefinition,
} from '@raftkit/http';
import { checkVideoCommand, VideoMachine, type VideoCommand, type VideoResult } from '../machine.js';

type Ctx = ServiceContext<VideoCommand, VideoResult>;
const ID = /^[A-Za-z0-9_-]{1,128}$/;

export function memberRoutes(service: Ctx): void {
  /** The service's one group (its kind provisioned as 'one group'). */
  const group = service.group();
  const read = async <T>(ctx: RequestContext, f: (m: VideoMachine) => T): Promise<T> => {
    await group.readBarrier(ctx);
    return group.node.readLocal((m) => f(m as VideoMachine));
  };
  const id = (ctx: RequestContext, name = 'id'): string => {
    const v = ctx.params[name] ?? '';
    if (!ID.test(v)) throw badRequest('invalid_id', `${name} is 1 to 128 of A-Z a-z 0-9 _ -`, { field: name });
    return v;
  };

  service.commandRoute('/internal/video/commands', {
    admits: 'cluster',
    check: (body) => {
      const command = requireObject(body, 'command');
      checkVideoCommand(command);
      return command;
    },
  });

  service.router
    .get('/internal/video/uploads/:id', { admits: 'cluster' }, async (ctx) => {
      const upload = await read(ctx, (m) => m.getUpload(id(ctx)));
      if (upload === null) throw notFound(`no upload ${ctx.params.id}`, { upload_id: ctx.params.id });
      return upload;
    })
    .get('/internal/video/videos/:id', { admits: 'cluster' }, async (ctx) => {
      const video = await read(ctx, (m) => m.getVideo(id(ctx)));
      if (video === null) throw notFound(`no video ${ctx.params.id}`, { video_id: ctx.params.id });
      return video;
    })
    .get('/internal/video/videos/:id/tasks', { admits: 'cluster' }, async (ctx) => ({
      tasks: await read(ctx, (m) => m.openTasks(id(ctx))),
    }))
    .get('/internal/video/videos/:id/segments/:quality', { admits: 'cluster' }, async (ctx) => {
      const quality = ctx.params.quality ?? '';
      if (!/^[A-Za-z0-9]{1,32}$/.test(quality))
        throw badRequest('invalid_quality', 'bad quality name', { field: 'quality' });
      return { segments: await read(ctx, (m) => m.segmentsOf(id(ctx), quality)) };
    })
    .get('/internal/video/users/:id/library', { admits: 'cluster' }, async (ctx) => {
      const limitText = ctx.query.get('limit') ?? '20';
      if (!/^\d{1,4}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 1000)
        throw badRequest('invalid_query', 'limit is 1 to 1000', { field: 'limit' });
      const afterCreated = ctx.query.get('after_created');
      const afterId = ctx.query.get('after_id');
      let after: { createdAt: number; videoId: string } | null = null;
      if (afterCreated !== null || afterId !== null) {
        if (afterCreated === null || afterId === null || !/^\d{1,16}$/.test(afterCreated) || !ID.test(afterId))
          throw badRequest('invalid_cursor', 'after_created and after_id go together');
        after = { createdAt: Number(afterCreated), videoId: afterId };
      }
      const includePrivate = ctx.query.get('private') === '1';
      return { videos: await read(ctx, (m) => m.library(id(ctx), Number(limitText), after, includePrivate)) };
    })
    // What one object store should hold (its anti-entropy's list): the ids of the uploads and videos placed on it.
    .get('/internal/video/placement/:id', { admits: 'cluster' }, async (ctx) =>
      read(ctx, (m) => m.placementOf(id(ctx))),
    )
    .get('/internal/video/work', { admits: 'cluster' }, async (ctx) => {
      const work = await read(ctx, (m) => m.pipelineWork());
      return work;
    })
    .get('/internal/video/status', { admits: 'cluster' }, async (ctx) => read(ctx, (m) => m.counts()));
}

export const videoMembers: Pick<ServiceDefinition<VideoCommand, VideoResult>, 'name' | 'kinds' | 'routes'> = {
  name: 'video',
  kinds: [
    { name: 'metadata', provisioning: 'one group', createMachine: () => new VideoMachine(), replicas: 'every member' },
  ],
  routes: memberRoutes,
};

/** A machine result that is not the kind asked for: a bug, said as one. */
export function unexpected(result: unknown): HttpError {
  return new HttpError(500, 'internal', `unexpected result ${JSON.stringify(result).slice(0, 200)}`);
}

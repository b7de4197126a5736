/** The post store's machine: pure, deterministic, tombstones that stay, likes counted once per user, snapshots. */
import t from 'tap';
import { checkPostCommand, PostsMachine, type NewPost } from '../src/machine.js';
import { newPostId, postIdTime } from '../src/post-id.js';

const ctx = (time = 1_000) => ({ index: 1, term: 1, time });
const newPost = (over: Partial<NewPost> = {}): NewPost => ({
  post_id: newPostId(1_700_000_000_000),
  author_id: 'ann',
  text: 'hi',
  media_ids: [],
  parent_post_id: null,
  repost_of: null,
  ...over,
});

t.test('create, again, delete, tombstone stays', async (t) => {
  const m = new PostsMachine();
  const p = newPost();
  const created = m.apply({ op: 'create', post: p }, ctx());
  t.match(created, {
    op: 'create',
    status: 'created',
    post: {
      post_id: p.post_id,
      created_at: postIdTime(p.post_id),
      engagement_counts: { likes: 0, comments: 0, shares: 0 },
    },
  });
  t.match(
    m.apply({ op: 'create', post: { ...p, text: 'other' } }, ctx()),
    { status: 'exists', post: { text: 'hi' } },
    'a replayed create changes nothing',
  );
  t.match(m.apply({ op: 'delete', post_id: p.post_id }, ctx(5_000)), {
    status: 'deleted',
    post: { text: '', deleted_at: 5_000 },
  });
  t.match(m.apply({ op: 'delete', post_id: p.post_id }, ctx(6_000)), {
    status: 'already_deleted',
    post: { deleted_at: 5_000 },
  });
  t.match(
    m.apply({ op: 'create', post: p }, ctx()),
    { status: 'deleted' },
    'a late create cannot bring a deleted post back',
  );
  t.match(m.apply({ op: 'like', post_id: p.post_id, user_id: 'bob', on: true }, ctx()), { status: 'deleted' });
  t.match(m.apply({ op: 'delete', post_id: newPostId() }, ctx()), { status: 'not_found', post: null });
});

t.test('likes once per user; comment and share counters', async (t) => {
  const m = new PostsMachine();
  const p = newPost();
  m.apply({ op: 'create', post: p }, ctx());
  t.match(m.apply({ op: 'like', post_id: p.post_id, user_id: 'bob', on: true }, ctx()), {
    status: 'changed',
    post: { engagement_counts: { likes: 1 } },
  });
  t.match(m.apply({ op: 'like', post_id: p.post_id, user_id: 'bob', on: true }, ctx()), {
    status: 'unchanged',
    post: { engagement_counts: { likes: 1 } },
  });
  t.match(m.apply({ op: 'like', post_id: p.post_id, user_id: 'cy', on: true }, ctx()), {
    post: { engagement_counts: { likes: 2 } },
  });
  t.match(m.apply({ op: 'like', post_id: p.post_id, user_id: 'bob', on: false }, ctx()), {
    post: { engagement_counts: { likes: 1 } },
  });
  t.match(m.apply({ op: 'like', post_id: p.post_id, user_id: 'bob', on: false }, ctx()), { status: 'unchanged' });
  t.match(m.apply({ op: 'count', post_id: p.post_id, field: 'comments' }, ctx()), {
    post: { engagement_counts: { comments: 1 } },
  });
  t.match(m.apply({ op: 'count', post_id: p.post_id, field: 'shares' }, ctx()), {
    post: { engagement_counts: { shares: 1 } },
  });

  const copy = new PostsMachine();
  copy.restore(m.snapshot());
  t.same(copy.get(p.post_id), m.get(p.post_id), 'a snapshot restores the same state');
  t.match(
    copy.apply({ op: 'like', post_id: p.post_id, user_id: 'cy', on: true }, ctx()),
    { status: 'unchanged' },
    'likers survive the snapshot',
  );
});

t.test('malformed commands are refused before they change anything', async (t) => {
  const bad: unknown[] = [
    null,
    { op: 'nope' },
    { op: 'create', post: { ...newPost(), post_id: 'short' } },
    { op: 'create', post: { ...newPost(), author_id: 'a b' } },
    { op: 'create', post: { ...newPost(), text: 'x'.repeat(5_001) } },
    { op: 'create', post: { ...newPost(), media_ids: Array(11).fill('m') } },
    { op: 'create', post: { ...newPost(), parent_post_id: 'x' } },
    { op: 'like', post_id: newPostId(), user_id: 'bob', on: 'yes' },
    { op: 'count', post_id: newPostId(), field: 'likes' },
  ];
  const m = new PostsMachine();
  for (const c of bad) {
    t.throws(() => checkPostCommand(c), JSON.stringify(c)?.slice(0, 60));
    t.throws(() => m.apply(c as never, ctx()));
  }
  t.equal(m.size, 0);
});

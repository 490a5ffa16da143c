export function ThreadPage({ id }: { id: string }) { return <main data-thread-page={id}>{id}</main>; }

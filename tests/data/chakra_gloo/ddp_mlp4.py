import torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 256))
ddp = DDP(m, bucket_cap_mb=1)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
for step in range(5):
    x = torch.randn(32, 512); y = torch.randn(32, 256)
    opt.zero_grad(); nn.functional.mse_loss(ddp(x), y).backward(); opt.step()
dist.destroy_process_group()
